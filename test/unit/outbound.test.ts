/**
 * Outbound requests to client-chosen URLs (src/http/outbound.ts): the host is resolved once, checked,
 * and the request sent to that address naming the host (Host header; for https TLS SNI and the
 * certificate check), against real local servers; an https one with certificates made here by openssl,
 * chosen by SNI, and trusted through fetch's `tls.ca`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { outboundFetch, RefusedAddress, type OutboundDeps } from '../../src/http/outbound.ts';

/** A self-signed certificate and key for `name` (subjectAltName DNS:name). */
function selfSigned(dir: string, name: string): { cert: string; key: string } {
  const [cert, key] = [join(dir, `${name}.crt`), join(dir, `${name}.key`)];
  const made = Bun.spawnSync(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-keyout', key, '-out', cert, '-subj', `/CN=${name}`, '-addext', `subjectAltName=DNS:${name}`]);
  if (made.exitCode !== 0) throw new Error(`openssl: ${made.stderr.toString()}`);
  return { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
}

/** What a server was asked: the Host header and the path. */
const echo = (req: Request) => Response.json({ host: req.headers.get('host'), path: new URL(req.url).pathname });

const resolveTo = (...answers: string[][]) => async () => (answers.length > 1 ? answers.shift()! : answers[0]!);

describe('outboundFetch over http', () => {
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: echo });
  afterAll(() => server.stop(true));

  test('the request goes to the address the name resolved to, with the name in the Host header', async () => {
    const deps: OutboundDeps = { fetch, resolve: resolveTo(['127.0.0.1']), allowPrivate: true };
    const res = await outboundFetch(deps, new URL(`http://hook.test:${server.port}/x`));
    expect(await res.json()).toEqual({ host: `hook.test:${server.port}`, path: '/x' });
  });

  test("a Host header the caller gives is replaced by the URL's authority: the name checked is the one a virtual host is chosen by", async () => {
    const init = { headers: { Host: 'internal.admin' } };
    const named = await outboundFetch({ fetch, resolve: resolveTo(['127.0.0.1']), allowPrivate: true }, new URL(`http://hook.test:${server.port}/x`), init);
    expect(await named.json()).toEqual({ host: `hook.test:${server.port}`, path: '/x' });
    const literal = await outboundFetch({ fetch, resolve: resolveTo(['127.0.0.1']), allowPrivate: true }, new URL(`http://127.0.0.1:${server.port}/y`), init);
    expect(await literal.json()).toEqual({ host: `127.0.0.1:${server.port}`, path: '/y' });
  });

  test('the name is resolved once: a second answer (a rebinding) is never used', async () => {
    const asked: string[] = [];
    const transport = (async (input: URL) => (asked.push(input.href), new Response('ok'))) as unknown as typeof fetch;
    const deps: OutboundDeps = { fetch: transport, resolve: resolveTo(['203.0.113.9'], ['127.0.0.1']), allowPrivate: false };
    expect((await outboundFetch(deps, new URL('http://hook.example/x'))).status).toBe(200);
    expect(asked).toEqual(['http://203.0.113.9/x']);
  });

  test('a private, loopback-named or unresolvable host is refused before any connection', async () => {
    const asked: string[] = [];
    const transport = (async (input: URL) => (asked.push(input.href), new Response('ok'))) as unknown as typeof fetch;
    const refusal = (resolve: OutboundDeps['resolve'], url: string) =>
      outboundFetch({ fetch: transport, resolve, allowPrivate: false }, new URL(url)).then(() => 'sent', (err: Error) => [err instanceof RefusedAddress, err.message]);
    expect(await refusal(resolveTo(['203.0.113.9', '169.254.169.254']), 'http://meta.example/')).toEqual([true,
      'its host meta.example resolves to 169.254.169.254, which is a loopback, link-local or private address']);
    expect(await refusal(resolveTo(['203.0.113.9']), 'http://[::1]:8080/')).toEqual([true, 'its host ::1 is a loopback, link-local or private address']);
    expect(await refusal(resolveTo(['203.0.113.9']), 'http://api.localhost/')).toEqual([true, 'its host api.localhost is a loopback name']);
    expect(await refusal(async () => Promise.reject(new Error('ENOTFOUND')), 'http://nowhere.example/')).toEqual([true, 'its host nowhere.example does not resolve']);
    expect(await refusal(resolveTo([]), 'http://empty.example/')).toEqual([true, 'its host empty.example does not resolve']);
    expect(asked).toEqual([]);
  });

  test('an IPv6 answer is put in brackets', async () => {
    const asked: string[] = [];
    const transport = (async (input: URL) => (asked.push(input.href), new Response('ok'))) as unknown as typeof fetch;
    await outboundFetch({ fetch: transport, resolve: resolveTo(['2606:4700::1111']), allowPrivate: false }, new URL('https://hook.example:8443/x?y=1'));
    expect(asked).toEqual(['https://[2606:4700::1111]:8443/x?y=1']);
  });

  test('an abort while the name resolves ends the request with its reason', async () => {
    const never = () => new Promise<string[]>(() => undefined);
    const signal = AbortSignal.timeout(50);
    const err = await outboundFetch({ fetch, resolve: never, allowPrivate: false }, new URL('http://slow.example/'), { signal }).catch((e: Error) => e);
    expect((err as Error).name).toBe('TimeoutError');
  });
});

describe('outboundFetch over https, the address pinned', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-outbound-'));
  let hook: { cert: string; key: string };
  let other: { cert: string; key: string };
  let server: ReturnType<typeof Bun.serve>;
  const deps: OutboundDeps = { fetch, resolve: resolveTo(['127.0.0.1']), allowPrivate: true };

  beforeAll(() => {
    hook = selfSigned(dir, 'hook.test');
    other = selfSigned(dir, 'other.test');
    // other.test's certificate unless the client's SNI names hook.test.
    server = Bun.serve({ port: 0, hostname: '127.0.0.1', tls: [other, { ...hook, serverName: 'hook.test' }], fetch: echo });
  });
  afterAll(() => {
    server.stop(true);
    rmSync(dir, { recursive: true, force: true });
  });

  test('SNI and the certificate check are for the name while the connection goes to the address', async () => {
    const res = await outboundFetch(deps, new URL(`https://hook.test:${server.port}/x`), { tls: { ca: [hook.cert, other.cert] } });
    expect(await res.json()).toEqual({ host: `hook.test:${server.port}`, path: '/x' });
  });

  test("a certificate for another name, or one not trusted, is still refused", async () => {
    // SNI wrong.test: the server answers with other.test's certificate, trusted but for another name.
    const wrongName = await outboundFetch(deps, new URL(`https://wrong.test:${server.port}/x`), { tls: { ca: [hook.cert, other.cert] } }).catch((e) => e);
    expect((wrongName as { code?: string }).code).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
    const untrusted = await outboundFetch(deps, new URL(`https://hook.test:${server.port}/x`)).catch((e) => e);
    expect((untrusted as { code?: string }).code).toBe('DEPTH_ZERO_SELF_SIGNED_CERT');
  });
});
