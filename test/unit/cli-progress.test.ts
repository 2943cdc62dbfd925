import { expect, test } from 'bun:test';
import type { CliIO } from '../../src/cli/command.ts';
import { createProgress, createTally } from '../../src/cli/progress.ts';

function io(isTTY: boolean) {
  const out = { stderr: '' };
  const value: CliIO = { env: {}, stdout: () => {}, stderr: (t) => void (out.stderr += t), stdin: async () => '', isTTY };
  return { io: value, out };
}

test('on a terminal: a bar redrawn in place at most every 100 ms, cleared before messages and at the end', () => {
  let now = 0;
  const { io: tty, out } = io(true);
  const p = createProgress(tty, 1000, () => now);
  p.update({ imported: 10, failed: 0, bytesRead: 100 });
  expect(out.stderr).toBe('');
  now = 2000;
  p.update({ imported: 50_000, failed: 2, bytesRead: 500 });
  expect(out.stderr).toBe('\r\x1b[2K[############------------] 50%  50,000 imported, 2 failed, 25,000/s');
  now = 2050;
  p.update({ imported: 60_000, failed: 2, bytesRead: 600 });
  expect(out.stderr).not.toContain('60,000');
  p.message('f.ndjson:3: bad');
  expect(out.stderr.endsWith('\r\x1b[2Kf.ndjson:3: bad\n')).toBe(true);
  out.stderr = '';
  p.done();
  expect(out.stderr).toBe('');
});

test('elsewhere: a plain line every 5 s', () => {
  let now = 0;
  const { io: plain, out } = io(false);
  const p = createProgress(plain, 0, () => now);
  now = 1000;
  p.update({ imported: 1, failed: 0, bytesRead: 0 });
  expect(out.stderr).toBe('');
  now = 5000;
  p.update({ imported: 5000, failed: 1, bytesRead: 0 });
  expect(out.stderr).toBe('import: 100%  5,000 imported, 1 failed, 1,000/s\n');
  p.done();
  expect(out.stderr).toBe('import: 100%  5,000 imported, 1 failed, 1,000/s\n');
  expect(p.elapsedSeconds()).toBe(5);
});

test('a count without a total (expunge, audit prune): redrawn on a terminal, a line every 5 s elsewhere', () => {
  let now = 0;
  const { io: tty, out } = io(true);
  const t = createTally(tty, 'expunge', 'versions removed', () => now);
  t.update(10, 'Patient');
  expect(out.stderr).toBe('');
  now = 2000;
  t.update(40_000, 'Observation');
  expect(out.stderr).toBe('\r\x1b[2Kexpunge: 40,000 versions removed, 20,000/s (Observation)');
  t.done();
  expect(out.stderr.endsWith('\r\x1b[2K')).toBe(true);
  const { io: plain, out: log } = io(false);
  now = 0;
  const l = createTally(plain, 'audit prune', 'AuditEvents removed', () => now);
  now = 4000;
  l.update(1);
  expect(log.stderr).toBe('');
  now = 5000;
  l.update(5000);
  expect(log.stderr).toBe('audit prune: 5,000 AuditEvents removed, 1,000/s\n');
  l.done();
  expect(log.stderr).toBe('audit prune: 5,000 AuditEvents removed, 1,000/s\n');
});
