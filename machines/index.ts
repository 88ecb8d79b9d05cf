/**
 * The machines as a package entry (`import { planMachine } from 'capsule-runtime/machines'`): the
 * pure definitions, with every effect a `notProvided` placeholder, to read, simulate or provide.
 */
export { planMachine, type PlanInput, type PlanOutput, type PlanEvent, type PlanEmitted } from './plan.machine.js';
export { stepMachine, type StepInput, type StepOutput } from './step.machine.js';
export { stepPoolMachine } from './step-pool.machine.js';
export { shellCallMachine } from './shell-call.machine.js';
export { sessionMachine } from './session.machine.js';
export { delegationMachine } from './delegation.machine.js';
export * from './contracts.js';
