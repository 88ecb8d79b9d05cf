/**
 * What the workers take from Redis only when it is signed with the shared key
 * (docs/scale-out.md#trust): the session's lease — its settings with it — and the coordinator's
 * control messages. A lease signed longer ago than a lease lasts is a copy put back.
 */
import { LEASE_CLOCK_SLACK_MS, LEASE_MS, signControl, signLease, staleLease, verifyControl, verifyLease } from '../../src/scale-out/job.js';

const KEY = Buffer.from('proofs-test-key-0123456789');
const OTHER = Buffer.from('another-key-entirely-0000');
const LEASE = { pid: 4242, created: 1_700_000_000_000, renewed: 1_700_000_003_000, lock_duration_ms: 2000, max_lost: 2 };

describe("a session's lease", () => {
  it('carries the settings its workers take, proven with the key', () => {
    const verified = verifyLease('ses_a', signLease('ses_a', LEASE, KEY), KEY);
    expect(verified).toEqual({ ok: true, lease: { ...LEASE, mac: expect.stringMatching(/^[0-9a-f]{64}$/) } });
  });

  it('is not taken when a setting was changed in Redis, when it is of another session, or signed with another key', () => {
    const value = JSON.parse(signLease('ses_a', LEASE, KEY)) as Record<string, unknown>;
    for (const changed of [{ lock_duration_ms: 1 }, { max_lost: 1000 }, { renewed: LEASE.renewed + 60_000 }, { created: 0 }]) {
      expect(verifyLease('ses_a', JSON.stringify({ ...value, ...changed }), KEY)).toEqual({ ok: false, reason: "its session's lease is not signed with the shared key" });
    }
    expect(verifyLease('ses_b', signLease('ses_a', LEASE, KEY), KEY).ok).toBe(false);
    expect(verifyLease('ses_a', signLease('ses_a', LEASE, OTHER), KEY).ok).toBe(false);
    expect(verifyLease('ses_a', '{"pid":1,"created":0}', KEY).ok).toBe(false);
    expect(verifyLease('ses_a', null, KEY)).toEqual({ ok: false, reason: 'its session has no lease (its coordinator is gone)' });
  });

  it('is stale once it is older, on Redis clock, than a lease lasts in Redis unless renewed', () => {
    const lease = { ...LEASE, mac: '' };
    expect(staleLease(lease, LEASE.renewed + LEASE_MS)).toBeNull();
    expect(staleLease(lease, LEASE.renewed + LEASE_MS + LEASE_CLOCK_SLACK_MS)).toBeNull();
    expect(staleLease(lease, LEASE.renewed + LEASE_MS + LEASE_CLOCK_SLACK_MS + 1)).toMatch(/^its session's lease was last renewed 12 s ago, longer than a lease lasts \(10 s\): a copy put back in Redis/);
  });
});

describe("a coordinator's control message", () => {
  it('is taken when signed with the key, whole', () => {
    const message = { type: 'end', session: 'ses_a', job: 'ses_a.1.build.1', grace_ms: 2000, only: { name: 'w1', host: 'h', pid: 7 } } as const;
    expect(verifyControl(signControl(message, KEY), KEY)).toEqual(message);
    expect(verifyControl(signControl({ type: 'close', session: 'ses_a' }, KEY), KEY)).toEqual({ type: 'close', session: 'ses_a' });
  });

  it('is not taken unsigned, changed, or signed with another key', () => {
    const signed = JSON.parse(signControl({ type: 'withdraw', session: 'ses_a', job: 'ses_a.1.build.1' }, KEY)) as Record<string, unknown>;
    expect(verifyControl(JSON.stringify({ ...signed, job: 'ses_a.1.deploy.1' }), KEY)).toBeNull();
    expect(verifyControl(JSON.stringify({ ...signed, type: 'end', grace_ms: 0 }), KEY)).toBeNull();
    expect(verifyControl(signControl({ type: 'close', session: 'ses_a' }, OTHER), KEY)).toBeNull();
    expect(verifyControl(JSON.stringify({ type: 'close', session: 'ses_a' }), KEY)).toBeNull();
    expect(verifyControl('not json', KEY)).toBeNull();
  });
});
