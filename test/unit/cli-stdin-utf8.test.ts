/**
 * `cinder user create --password-stdin` as a process: a password in Latin-1 (bytes that are not UTF-8) is a usage
 * error naming the first bad byte, never hashed as U+FFFD (which any other password of that shape would then
 * match); one in UTF-8 is taken. The refusal comes before the database is touched (SQLite here).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
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
