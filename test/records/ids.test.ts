import { newEventId, uuidV7Simple } from '../../src/ids.js';

describe('event ids (docs/trace.md#the-envelope)', () => {
  it('are evt_ and a UUID v7 in simple form', () => {
    expect(newEventId()).toMatch(/^evt_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
  });

  it('sort by mint time, also when many are minted within one millisecond', () => {
    const ids = Array.from({ length: 20_000 }, () => uuidV7Simple());
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it('carry the mint time in their first 48 bits', () => {
    const before = Date.now();
    const id = uuidV7Simple();
    const after = Date.now();
    const msecs = parseInt(id.slice(0, 12), 16);
    expect(msecs).toBeGreaterThanOrEqual(before);
    expect(msecs).toBeLessThanOrEqual(after + 1);
  });
});
