/**
 * The e2e tests' count of listening servers (test/helpers/processes.ts listeningPids): a child holding a
 * copy of its parent's listening socket (as between fork and exec) is no second server.
 */
import { expect, test } from 'bun:test';
import { readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../helpers/export-e2e.ts';
import { listeningPids } from '../helpers/processes.ts';

test.skipIf(process.platform !== 'linux')('a socket a child inherited is counted once, for the parent', async () => {
  const port = freePort();
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, '../fixtures/processes/listen-and-hand-down.ts'), String(port)], { stdout: 'pipe', stderr: 'inherit' });
  let child = 0;
  try {
    const reader = proc.stdout.getReader();
    let line = '';
    while (!line.includes('\n')) {
      const chunk = await reader.read();
      if (chunk.done) break;
      line += new TextDecoder().decode(chunk.value);
    }
    const [parent, handedDown] = line.trim().split(' ').map(Number) as [number, number];
    child = handedDown;
    // The child does hold the listening socket: the case the count must see through.
    const held = readdirSync(`/proc/${child}/fd`).map((fd) => {
      try {
        return readlinkSync(`/proc/${child}/fd/${fd}`);
      } catch {
        return '';
      }
    });
    expect(held.some((t) => t.startsWith('socket:'))).toBe(true);
    expect(listeningPids(port)).toEqual([parent]);
  } finally {
    if (child) process.kill(child, 'SIGKILL');
    proc.kill('SIGKILL');
    await proc.exited;
  }
});
