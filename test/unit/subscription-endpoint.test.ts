/**
 * The address check of rest-hook endpoints (src/fhir/subscriptions/endpoint.ts): loopback, unspecified,
 * link-local, private, shared and multicast addresses in every spelling a URL or a resolver may give
 * them (IPv4-mapped and NAT64 IPv6, numeric IPv4 hosts the URL parser normalises), and names that
 * resolve to one, are refused; public addresses are not.
 */
import { describe, expect, test } from 'bun:test';
import { endpointUrl, isPrivateAddress, privateEndpoint } from '../../src/fhir/subscriptions/endpoint.ts';

describe('isPrivateAddress', () => {
  test.each([
    '127.0.0.1', '127.8.9.10', '0.0.0.0', '0.1.2.3', '10.0.0.1', '172.16.0.1', '172.31.255.255', '192.168.0.1', '169.254.169.254',
    '100.64.0.1', '224.0.0.1', '255.255.255.255',
    '::1', '::', '0:0:0:0:0:0:0:1', 'fe80::1', 'febf::1', 'fc00::1', 'fd12:3456::1', 'ff02::1',
    '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:a00:1', '::ffff:169.254.169.254', '64:ff9b::7f00:1', '64:ff9b::10.0.0.1', 'fe80::1%eth0', 'fec0::1',
  ])('%s is refused', (ip) => {
    expect(isPrivateAddress(ip)).toBe(true);
  });

  test.each(['8.8.8.8', '172.15.0.1', '172.32.0.1', '192.169.0.1', '100.63.0.1', '169.253.0.1', '203.0.113.5', '2606:4700::1111', '2001:db8::1', '::ffff:8.8.8.8', '64:ff9b::808:808', '64:ff9b:1::808:808', '2002:808:808::1'])(
    '%s is not', (ip) => {
      expect(isPrivateAddress(ip)).toBe(false);
    },
  );

  test('anything that is no address is refused', () => {
    expect(isPrivateAddress('not-an-ip')).toBe(true);
  });
});

describe('privateEndpoint', () => {
  const none = async () => [];
  const at = (host: string) => new URL(`http://${host}/hook`);

  test('numeric hosts in any spelling the URL parser normalises', async () => {
    for (const host of ['2130706433', '0x7f.1', '0177.0.0.1', '[::ffff:127.0.0.1]', '127.1']) {
      expect([host, await privateEndpoint(at(host), none)]).toEqual([host, expect.stringContaining('loopback, link-local or private')]);
    }
  });

  test('localhost names whatever the resolver says; other names by what they resolve to, every address', async () => {
    const publicOnly = async () => ['203.0.113.5'];
    expect(await privateEndpoint(at('localhost'), publicOnly)).toContain('loopback name');
    expect(await privateEndpoint(at('api.localhost'), publicOnly)).toContain('loopback name');
    expect(await privateEndpoint(at('hook.example'), publicOnly)).toBeUndefined();
    const mixed = async () => ['203.0.113.5', '10.0.0.7'];
    expect(await privateEndpoint(at('hook.example'), mixed)).toContain('resolves to 10.0.0.7');
  });

  test('a name that does not resolve is no reason to refuse yet (each request resolves it again)', async () => {
    const fails = async () => Promise.reject(new Error('ENOTFOUND'));
    expect(await privateEndpoint(at('nowhere.example'), fails)).toBeUndefined();
  });
});

describe('endpointUrl', () => {
  test('an absolute http(s) URL with a host and no credentials', () => {
    expect(endpointUrl('https://hook.example/x')).toBeInstanceOf(URL);
    expect(endpointUrl('/relative')).toBe('is not an absolute URL');
    expect(endpointUrl('ftp://hook.example/')).toContain('http or https');
    expect(endpointUrl('https://user:pw@hook.example/')).toContain('credentials');
    expect(endpointUrl(42)).toBe('is not an absolute URL');
  });
});
