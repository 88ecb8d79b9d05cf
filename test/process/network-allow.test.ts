/**
 * The allow-list of a session's network (`capabilities.network.allow`,
 * docs/containment.md#the-allow-list): which destinations an entry names, the manifest's refusal
 * of one that names none, and the namespace's nftables ruleset built from them.
 */
import { parseAllowEntry } from '../../src/manifest.js';
import { allowRuleset, resolveAllowList } from '../../src/process/network.js';
import { manifestSchema } from '../../src/manifest.js';

describe('an allow-list entry', () => {
  it.each([
    ['10.0.0.5', { host: '10.0.0.5', kind: 'ip4', prefix: null, port: null }],
    ['10.0.0.5:443', { host: '10.0.0.5', kind: 'ip4', prefix: null, port: 443 }],
    ['10.0.0.0/8', { host: '10.0.0.0', kind: 'ip4', prefix: 8, port: null }],
    ['::1', { host: '::1', kind: 'ip6', prefix: null, port: null }],
    ['[2001:db8::1]:53', { host: '2001:db8::1', kind: 'ip6', prefix: null, port: 53 }],
    ['2001:db8::/32', { host: '2001:db8::', kind: 'ip6', prefix: 32, port: null }],
    ['registry.npmjs.org:443', { host: 'registry.npmjs.org', kind: 'name', prefix: null, port: 443 }],
  ])('%s names its destination', (text, parsed) => {
    expect(parseAllowEntry(text)).toEqual(parsed);
  });

  it.each(['', '10.0.0.5:0', '10.0.0.5:70000', '10.0.0.0/33', 'a b', 'host:port', '-bad.example:80', 'x:1:2'])('%j names none', (text) => {
    expect(parseAllowEntry(text)).toBeNull();
  });

  it('is refused in the manifest with the key and the forms it takes', () => {
    const parsed = manifestSchema().safeParse({ capabilities: { network: { allow: ['10.0.0.5:http'] } } });
    expect(parsed.success).toBe(false);
    expect(JSON.stringify(parsed.error?.issues)).toContain('expected a destination: \\"IP\\", \\"IP:PORT\\"');
    expect(manifestSchema().safeParse({ capabilities: { network: { allow: [] } } }).success).toBe(false);
    expect(manifestSchema().safeParse({ capabilities: { network: 'everywhere' } }).success).toBe(false);
  });
});

describe("the namespace's ruleset", () => {
  it('lets out loopback, replies and each allowed destination (TCP and UDP to its port, or every port), and refuses the rest at once', () => {
    const ruleset = allowRuleset(resolveAllowList(['192.0.2.1:8080', '10.0.0.0/8', '[2001:db8::1]:53']));
    expect(ruleset).toContain('policy drop;');
    expect(ruleset).toContain('oif "lo" accept');
    expect(ruleset).toContain('ip daddr 192.0.2.1 tcp dport 8080 accept');
    expect(ruleset).toContain('ip daddr 192.0.2.1 udp dport 8080 accept');
    expect(ruleset).toContain('ip daddr 10.0.0.0/8 accept');
    expect(ruleset).toContain('ip6 daddr 2001:db8::1 tcp dport 53 accept');
    expect(ruleset).toContain('meta l4proto tcp reject with tcp reset');
    expect(ruleset.indexOf('reject')).toBeGreaterThan(ruleset.indexOf('dport 53 accept'));
  });
});
