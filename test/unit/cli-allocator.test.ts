/**
 * The batch commands execute themselves again with mimalloc's purging off (src/cli/allocator.ts): the
 * arguments for `bun src/main.ts` and for the compiled binary, the commands it applies to, a setting
 * of the user's kept; and a spawned `cinder import` really runs with it.
 */
import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { allocatorReexec, PURGE_DELAY } from '../../src/cli/allocator.ts';

const MAIN = resolve(import.meta.dir, '../../src/main.ts');

describe('allocatorReexec', () => {
  test('a batch command run by bun: the runtime, its flags, the script and the words again, purging off', () => {
    const r = allocatorReexec(['/usr/bin/bun', '/app/src/main.ts', 'import', '--tenant', 't1', 'a.ndjson'], ['--smol'], { HOME: '/root' }, '/usr/bin/bun');
    expect(r).toEqual({
      path: '/usr/bin/bun',
      args: ['/usr/bin/bun', '--smol', '/app/src/main.ts', 'import', '--tenant', 't1', 'a.ndjson'],
      env: { HOME: '/root', [PURGE_DELAY]: '-1' },
    });
  });

  test('the compiled binary: itself and the words (its script is inside it)', () => {
    const r = allocatorReexec(['bun', '/$bunfs/root/cinder', 'reindex', '--if-needed'], [], {}, '/usr/local/bin/cinder');
    expect(r?.args).toEqual(['/usr/local/bin/cinder', 'reindex', '--if-needed']);
    expect(r?.path).toBe('/usr/local/bin/cinder');
  });

  test("only the batch commands, once, and not over the user's own setting", () => {
    for (const c of ['import', 'reindex', 'export', 'validate']) expect(allocatorReexec(['bun', 'm.ts', c], [], {}, 'bun')).toBeDefined();
    for (const c of ['serve', 'tenant', 'client', 'user', 'keys', 'migrate', 'healthcheck', '--help']) expect(allocatorReexec(['bun', 'm.ts', c], [], {}, 'bun')).toBeUndefined();
    expect(allocatorReexec(['bun', 'm.ts'], [], {}, 'bun')).toBeUndefined();
    expect(allocatorReexec(['bun', 'm.ts', 'import'], [], { [PURGE_DELAY]: '-1' }, 'bun')).toBeUndefined();
    expect(allocatorReexec(['bun', 'm.ts', 'import'], [], { [PURGE_DELAY]: '250' }, 'bun')).toBeUndefined();
  });
});

/** The environment `bun src/main.ts <words>` runs its command with, read from /proc while it runs. */
async function commandEnvironment(words: string[], env: Record<string, string> = {}): Promise<string[]> {
  const child = Bun.spawn(['bun', MAIN, ...words], { env: { ...process.env, ...env, CINDER_DATA_DIR: '/nonexistent/cinder-allocator-test' }, stdout: 'ignore', stderr: 'ignore' });
  let seen: string[] = [];
  // Until it exits: the last environment read is the command's own (after any execve, same pid).
  while (child.exitCode === null) {
    try {
      const environ = readFileSync(`/proc/${child.pid}/environ`, 'utf8');
      // An exited process not yet reaped reads as empty: the last environment seen stands.
      if (environ) seen = environ.split('\0').filter((e) => e.startsWith(`${PURGE_DELAY}=`));
    } catch {
      break;
    }
    await Bun.sleep(2);
  }
  await child.exited;
  return seen;
}

describe.if(process.platform === 'linux')('the spawned command', () => {
  test("cinder import runs with purging off; serve's --help and a setting of the user's are left alone", async () => {
    expect(await commandEnvironment(['import', '--tenant', 'nope', '/nonexistent.ndjson'])).toEqual([`${PURGE_DELAY}=-1`]);
    expect(await commandEnvironment(['serve', '--help'])).toEqual([]);
    expect(await commandEnvironment(['import', '--tenant', 'nope', '/nonexistent.ndjson'], { [PURGE_DELAY]: '250' })).toEqual([`${PURGE_DELAY}=250`]);
  }, 30_000);
});
