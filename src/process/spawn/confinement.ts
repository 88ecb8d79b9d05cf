/**
 * Confinement: what a step is kept from beyond its backend and PID namespace (see
 * docs/security.md#what-a-step-gets), decided once per session from what the spawn helper can do
 * here ({@link HelperProbe}) and the session's opt-out (`--privileged-steps`,
 * `capabilities.privileged_steps`), and said in `session_start.containment.confinement`,
 * `capsule run --verbose` and `capsule doctor`.
 */
import { readFileSync } from 'node:fs';
import type { SessionConfinementFields } from '../../records/trace-records.js';
import { KEPT_CAPABILITIES, type HelperProbe, type RunAsUser } from './helper.js';

/** What a step is kept from, beyond its backend and PID namespace (`session_start.containment.confinement`). */
export interface Confinement {
  /** The opt-out (`--privileged-steps`, `capabilities.privileged_steps`) is in effect. */
  readonly privilegedSteps: boolean;
  /**
   * The capabilities a step's processes can hold at most (as root; a `--run-as` user holds none
   * of them), or null: every capability the runtime's user has (not limited).
   */
  readonly capabilities: readonly string[] | null;
  /** `no_new_privs` is set: exec'ing a setuid or file-capability program gains nothing. */
  readonly noNewPrivs: boolean;
  /** A seccomp filter refuses a new user namespace (`unshare`/`clone` with `CLONE_NEWUSER`, `clone3`) and `setns`. */
  readonly seccomp: boolean;
  /** A cgroup namespace rooted at the tree's own cgroup (the session's, on the process-group backend). */
  readonly cgroupNamespace: boolean;
  /** /sys (the cgroup filesystems included) and /proc/{sys,sysrq-trigger,irq,bus,fs} are read-only. */
  readonly readOnlyKernel: boolean;
  /** Bound read-only (the runtime's own files, the records root), each with every directory above it pinned against rename. */
  readonly readOnly: readonly string[];
  /** Writable exceptions beneath them (the session's scratch directory, a workdir inside the package). */
  readonly writable: readonly string[];
  /** Hidden under an empty read-only tmpfs (the records key's directory). */
  readonly hidden: readonly string[];
  /** What is missing and why; `''` when nothing is. */
  readonly reason: string;
  /** The helper's `--caps` applies to every tree (not recorded: `capabilities` and `noNewPrivs` say what it does). */
  readonly dropsCapabilities: boolean;
}

/** `session_start.containment.confinement` (docs/trace.md). */
export function confinementTraceFields(confinement: Confinement): SessionConfinementFields {
  return {
    privileged_steps: confinement.privilegedSteps,
    capabilities: confinement.capabilities,
    no_new_privs: confinement.noNewPrivs,
    seccomp: confinement.seccomp,
    cgroup_namespace: confinement.cgroupNamespace,
    read_only_kernel: confinement.readOnlyKernel,
    read_only: confinement.readOnly,
    hidden: confinement.hidden,
    reason: confinement.reason,
  };
}

/** Whether this process holds any capability (`CapPrm` of /proc/self/status; root does, with all of them). */
function holdsCapabilities(): boolean {
  try {
    const line = /^CapPrm:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    return line !== null && BigInt(`0x${line[1] ?? '0'}`) !== 0n;
  } catch {
    return process.getuid?.() === 0;
  }
}

/** Decides {@link Confinement} from what the helper can do here (`probe`; null without a helper). */
export function decideConfinement(input: {
  readonly probe: HelperProbe | null;
  readonly helperReason: string;
  readonly pidNamespace: boolean;
  readonly runAs: RunAsUser | null;
  readonly privilegedSteps: boolean;
  readonly privilegedStepsBy: string;
  /** Every tree goes through the helper anyway (a cgroup to join, a namespace, a user). */
  readonly helperAnyway: boolean;
  readonly readOnly: readonly string[];
  readonly writable: readonly string[];
  readonly hidden: readonly string[];
  readonly notes: readonly string[];
}): Confinement {
  const { probe, pidNamespace, runAs } = input;
  const missing: string[] = pidNamespace ? [...input.notes] : [];
  const mounts = pidNamespace ? { readOnly: input.readOnly, writable: input.writable, hidden: input.hidden } : { readOnly: [], writable: [], hidden: [] };
  if (!pidNamespace && (input.readOnly.length > 0 || input.hidden.length > 0)) missing.push("no mount namespace: the records root is writable and the records key and the step cache's store visible to steps (as the file permissions allow)");
  const holds = holdsCapabilities();
  // What a step can hold with nothing dropped: the runtime user's own (none when it holds none, or runs steps as another user).
  const undropped = runAs !== null || !holds ? [] : null;
  if (input.privilegedSteps || probe === null) {
    return {
      privilegedSteps: input.privilegedSteps,
      capabilities: undropped,
      noNewPrivs: runAs !== null,
      seccomp: false,
      cgroupNamespace: false,
      readOnlyKernel: false,
      dropsCapabilities: false,
      ...mounts,
      reason: [
        input.privilegedSteps
          ? `privileged steps (${input.privilegedStepsBy}): steps keep every capability of the runtime's user, no cgroup namespace, /sys and the cgroup filesystems writable`
          : `not confined: ${input.helperReason}`,
        ...missing,
      ].join('; '),
    };
  }
  const caps = probe.capabilities;
  // Root's steps go through the helper to lose their capabilities even where nothing else needs it.
  const dropsCapabilities = caps === 'ok' || (caps === 'none' && input.helperAnyway);
  if (typeof caps === 'object') missing.push(caps.reason);
  const seccomp = dropsCapabilities && probe.seccomp.ok;
  if (dropsCapabilities && !probe.seccomp.ok) missing.push(`${probe.seccomp.reason}: a step may make a user namespace of its own`);
  const confine = pidNamespace && probe.confine.ok;
  if (pidNamespace && !probe.confine.ok) missing.push(probe.confine.reason);
  if (!pidNamespace) missing.push('no cgroup namespace, /sys and the cgroup filesystems as writable as the file permissions allow: there is no PID + mount namespace');
  return {
    privilegedSteps: false,
    capabilities: caps === 'ok' && runAs === null ? KEPT_CAPABILITIES : undropped,
    noNewPrivs: runAs !== null || dropsCapabilities,
    seccomp,
    cgroupNamespace: confine,
    readOnlyKernel: confine,
    dropsCapabilities,
    ...mounts,
    reason: missing.join('; '),
  };
}

/** The warning a session with privileged steps gives when it opens. */
export function privilegedStepsWarning(confinement: Confinement): string {
  return `${confinement.reason.split(';')[0] ?? 'privileged steps'}: a step running as root can undo its isolation (unmount, ptrace, leave its cgroup, read the records key, make user namespaces): docs/security.md#privileged-steps`;
}

/** What a step gets, in words (`capsule doctor`, `capsule run --verbose`): one line. */
export function describeConfinement(confinement: Confinement): string {
  const parts = [
    confinement.privilegedSteps ? 'privileged steps' : null,
    confinement.capabilities === null ? "every capability of the runtime's user" : confinement.capabilities.length === 0 ? 'no capabilities' : `capabilities ${confinement.capabilities.join(',')}`,
    confinement.noNewPrivs ? 'no_new_privs' : 'no no_new_privs',
    confinement.seccomp ? 'no user namespaces (seccomp)' : 'user namespaces allowed',
    confinement.cgroupNamespace ? 'a cgroup namespace' : 'no cgroup namespace',
    confinement.readOnlyKernel ? '/sys and cgroup filesystems read-only' : '/sys and cgroup filesystems not read-only',
    confinement.readOnly.length > 0 ? `read-only ${confinement.readOnly.join(', ')}` : 'no read-only records',
    confinement.hidden.length > 0 ? `hidden ${confinement.hidden.join(', ')}` : 'records key not hidden',
  ].filter((part): part is string => part !== null);
  return `${parts.join('; ')}${confinement.reason !== '' && !confinement.privilegedSteps ? ` — ${confinement.reason}` : ''}`;
}
