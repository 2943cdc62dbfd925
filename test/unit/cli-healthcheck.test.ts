import { afterAll, beforeAll, expect, test } from 'bun:test';
import { runCli } from '../../src/cli/index.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';

let t: TestApp;
let server: ReturnType<typeof Bun.serve>;

beforeAll(async () => {
  t = await createTestApp();
  server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: t.app.fetch });
});

afterAll(async () => {
  await server.stop(true);
  await t.close();
});

async function healthcheck(argv: string[], env: Record<string, string> = {}) {
  let stderr = '';
  const code = await runCli(['healthcheck', ...argv], { env, stdout: () => {}, stderr: (s) => void (stderr += s), stdin: async () => '', isTTY: false });
  return { code, stderr };
}

test('exits 0 when the server on CINDER_PORT answers /healthz', async () => {
  expect(await healthcheck([], { CINDER_PORT: String(server.port) })).toEqual({ code: 0, stderr: '' });
});

test('exits 1 when nothing listens, or the URL does not answer 200', async () => {
  const probe = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('x') });
  const closedPort = probe.port;
  await probe.stop(true);
  const down = await healthcheck([], { CINDER_PORT: String(closedPort) });
  expect(down.code).toBe(1);
  expect(down.stderr).toContain(`http://127.0.0.1:${closedPort}/healthz`);
  const notFound = await healthcheck(['--url', `http://127.0.0.1:${server.port}/nothing-here`]);
  expect(notFound).toEqual({ code: 1, stderr: `cinder healthcheck: http://127.0.0.1:${server.port}/nothing-here answered 404\n` });
});

test('a server listening on one address (CINDER_HOST) is checked there, not on 127.0.0.1', async () => {
  const one = Bun.serve({ port: 0, hostname: '127.0.0.2', fetch: t.app.fetch });
  try {
    expect(await healthcheck([], { CINDER_HOST: '127.0.0.2', CINDER_PORT: String(one.port) })).toEqual({ code: 0, stderr: '' });
    // Every address (the image's 0.0.0.0, or ::) is reached on the loopback.
    expect(await healthcheck([], { CINDER_HOST: '0.0.0.0', CINDER_PORT: String(server.port) })).toEqual({ code: 0, stderr: '' });
    expect(await healthcheck([], { CINDER_HOST: '::', CINDER_PORT: String(server.port) })).toEqual({ code: 0, stderr: '' });
  } finally {
    await one.stop(true);
  }
});

test('a bad --url or --timeout is a usage error', async () => {
  expect((await healthcheck(['--url', 'not a url'])).code).toBe(2);
  expect((await healthcheck(['--timeout', '-5'])).code).toBe(2);
});
