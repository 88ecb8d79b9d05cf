/**
 * The session's shell calls (`shell.run`, `backgroundCommand`, their texts: src/shell-calls/, held
 * by the session as src/shell-calls/background.ts) are loaded at their first use, so that
 * `capsule run` of a plan never compiles them (startup). `capsule serve` loads them when
 * its session opens (`session.background.load()`): from then on a call's first part runs at once,
 * in the call, as it always did.
 */
import { endSessions, policyB } from './helpers.js';

afterEach(async () => {
  await endSessions();
});

it('answers the first shell.run of a session whose doors are not loaded yet, as any other (a refusal with its message)', async () => {
  const b = policyB({ graceMs: null });
  // The first door called in this file: it loads the doors.
  expect(await b.session.background.run({ binary: 'nope', command: 'x' })).toMatchObject({
    status: 'refused',
    code: 'binary_not_allowed',
    error: "binary 'nope' is not in capabilities.shell.allow (no manifest was loaded): add it to the manifest's capabilities.shell.allow and start capsule serve again (it reads its manifest once, when it starts), or add --allow nope to capsule serve's start flags (for the whole session)",
  });
  expect(await b.session.background.run({ binary: 'bash', command: 'echo first' })).toMatchObject({ status: 'finished', exit_code: 0 });
});

it("starts a shell.run's task in the call itself once the doors are loaded (capsule serve loads them at its start)", async () => {
  const b = policyB({ graceMs: null });
  await b.session.background.load();
  const call = b.session.background.run({ binary: 'bash', command: 'true' });
  // Before the call's promise is awaited: its task is already in the table.
  expect(b.session.tasks.running().map((task) => task.kind)).toContain('shell');
  expect(await call).toMatchObject({ status: 'finished', exit_code: 0 });
});

it("shell-quotes the binary in a refusal's --allow flag, as plan refusals do, so the flag can be pasted", async () => {
  const b = policyB({ graceMs: null });
  const refused = await b.session.background.run({ binary: "it's mine", command: 'x' });
  expect(refused).toMatchObject({ status: 'refused', code: 'binary_not_allowed' });
  expect('error' in refused ? refused.error : '').toContain("or add --allow 'it'\\''s mine' to capsule serve's start flags (for the whole session)");
});
