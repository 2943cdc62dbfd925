/**
 * The process-level policy of `cinder serve` (src/cli/crash-policy.ts): an unhandled rejection is logged
 * and counted and the process goes on; an uncaught exception is logged and ends the process with 70.
 */
import { expect, test } from 'bun:test';
import { EventEmitter } from 'node:events';
import { CRASH_EXIT_CODE, installCrashPolicy } from '../../src/cli/crash-policy.ts';
import { createMetrics } from '../../src/http/metrics.ts';
import { background, createLogger } from '../../src/log.ts';

function setUp() {
  const proc = new EventEmitter();
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('info', {}, (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
  const exits: number[] = [];
  const metrics = createMetrics();
  const policy = installCrashPolicy({ proc, log, metrics, exit: (code) => exits.push(code) });
  return { proc, lines, exits, metrics, policy };
}

test('an unhandled rejection is logged with its error and counted; the process goes on', async () => {
  const { proc, lines, exits, metrics } = setUp();
  proc.emit('unhandledRejection', new Error('connection lost'));
  expect(exits).toEqual([]);
  expect(lines).toHaveLength(1);
  expect(lines[0]!.level).toBe('error');
  expect(String(lines[0]!.msg)).toContain('unhandled promise rejection');
  expect((lines[0]!.err as { message: string }).message).toBe('connection lost');
  expect(await metrics.render()).toContain('cinder_unhandled_errors_total{kind="rejection"} 1');
});

test('an uncaught exception is logged and ends the process with EX_SOFTWARE (70)', async () => {
  const { proc, lines, exits, metrics } = setUp();
  proc.emit('uncaughtException', new TypeError('x is undefined'));
  expect(exits).toEqual([CRASH_EXIT_CODE]);
  expect(CRASH_EXIT_CODE).toBe(70);
  expect(String(lines[0]!.msg)).toContain('uncaught exception');
  expect((lines[0]!.err as { name: string }).name).toBe('TypeError');
  expect(await metrics.render()).toContain('cinder_unhandled_errors_total{kind="exception"} 1');
});

test('uninstall takes the handlers off', () => {
  const { proc, policy } = setUp();
  policy.uninstall();
  expect(proc.listenerCount('unhandledRejection')).toBe(0);
  expect(proc.listenerCount('uncaughtException')).toBe(0);
});

test('background() logs a failed task instead of leaving its rejection unhandled', async () => {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('info', {}, (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
  let unhandled = 0;
  const count = () => unhandled++;
  process.on('unhandledRejection', count);
  try {
    background(log, 'purging failed', Promise.reject(new Error('gone')), { task: 'purge' });
    await Bun.sleep(10);
  } finally {
    process.off('unhandledRejection', count);
  }
  expect(unhandled).toBe(0);
  expect(lines).toEqual([expect.objectContaining({ level: 'error', msg: 'purging failed', task: 'purge', err: expect.objectContaining({ message: 'gone' }) })]);
});
