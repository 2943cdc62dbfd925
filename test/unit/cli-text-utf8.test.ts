/**
 * Text the CLI reads besides import files. `cinder user create --password-stdin` as a process: a password in
 * Latin-1 (bytes that are not UTF-8) is a usage error naming the first bad byte, never hashed as U+FFFD (which any
 * other password of that shape would then match); one in UTF-8 is taken. `client create --jwks-file` with a file
 * that is not UTF-8: a usage error, no client. Each refusal comes before the database is written (SQLite here).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';

let cli: ReturnType<typeof createCliEnv>;
beforeAll(async () => {
  cli = createCliEnv();
  expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
});
afterAll(() => cli.close());

/** `bun src/main.ts user create ...` with `stdin` as its standard input. */
async function create(username: string, stdin: Uint8Array) {
  const proc = Bun.spawn(['bun', 'src/main.ts', 'user', 'create', '--tenant', 't1', '--username', username, '--password-stdin'], {
    cwd: join(import.meta.dir, '../..'), env: { ...process.env, ...cli.env }, stdin, stdout: 'pipe', stderr: 'pipe',
  });
  return { code: await proc.exited, err: await new Response(proc.stderr).text() };
}

test('a password on standard input that is not UTF-8 is a usage error naming the byte; the user is not created', async () => {
  const latin1 = new Uint8Array(Buffer.from('gr\xfcn-und-gelb\n', 'latin1'));
  const refused = await create('latin', latin1);
  expect(refused.code).toBe(2);
  expect(refused.err).toStartWith('cinder user create: standard input is not valid UTF-8: byte 0xFC at byte offset 2 (counting from 0); send it in UTF-8\n');
  const store = cli.store();
  try {
    expect(await store.users.byUsername('t1', 'latin')).toBeNull();
    const taken = await create('utf8', new TextEncoder().encode('gr\u00fcn-und-gelb\n'));
    expect(taken).toMatchObject({ code: 0 });
    const user = (await store.users.byUsername('t1', 'utf8'))!;
    expect(await Bun.password.verify('gr\u00fcn-und-gelb', user.passwordHash)).toBe(true);
  } finally {
    await store.close();
  }
}, 60_000);

test('a --jwks-file that is not UTF-8 is a usage error naming the byte; no client is registered', async () => {
  const file = join(cli.dir, 'jwks.json');
  const text = '{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"schl\xfcssel"}]}';
  writeFileSync(file, Buffer.from(text, 'latin1'));
  const r = await cli.run(['client', 'create', '--tenant', 't1', '--no-secret', '--jwks-file', file, '--json']);
  expect(r.code).toBe(2);
  expect(r.stderr).toStartWith(`cinder client create: --jwks-file ${file}: not valid UTF-8: byte 0xFC at byte offset ${text.indexOf('\xfc')} (counting from 0)\n`);
  const store = cli.store();
  try {
    expect(await store.clients.list('t1')).toEqual([]);
  } finally {
    await store.close();
  }
});
