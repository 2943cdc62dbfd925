import type { CliIO } from './command.ts';

export interface Counts {
  imported: number;
  failed: number;
  bytesRead: number;
}

const WIDTH = 24;
const number = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

/** `12,345`. */
export function formatCount(n: number): string {
  return number.format(n);
}

/** The words of a progress line: `import: 50%  1,000 imported, 2 failed, ...`. */
export interface ProgressWords {
  task: string;
  done: string;
  failed: string;
}

const IMPORT_WORDS: ProgressWords = { task: 'import', done: 'imported', failed: 'failed' };

/**
 * Progress of a long-running import (or another task counted the same way) on stderr: a bar with the
 * rate redrawn in place on a terminal (at most every 100 ms), a plain line every few seconds otherwise
 * (logs, CI). `bytesRead` of `totalBytes` is the fraction done, in whatever unit the task counts.
 */
export function createProgress(io: CliIO, totalBytes: number, now: () => number = () => performance.now(), words = IMPORT_WORDS) {
  const started = now();
  const interval = io.isTTY ? 100 : 5000;
  let last = started;
  let drawn = false;

  function line(c: Counts): string {
    const fraction = totalBytes > 0 ? Math.min(1, c.bytesRead / totalBytes) : 1;
    const seconds = (now() - started) / 1000;
    const rate = seconds > 0 ? c.imported / seconds : 0;
    const text = `${Math.floor(fraction * 100)}%  ${formatCount(c.imported)} ${words.done}, ${formatCount(c.failed)} ${words.failed}, ${formatCount(rate)}/s`;
    if (!io.isTTY) return `${words.task}: ${text}\n`;
    const filled = Math.round(fraction * WIDTH);
    return `\r\x1b[2K[${'#'.repeat(filled)}${'-'.repeat(WIDTH - filled)}] ${text}`;
  }

  function clear(): void {
    if (drawn) io.stderr('\r\x1b[2K');
    drawn = false;
  }

  return {
    /** Redraws when enough time has passed since the last drawing. */
    update(c: Counts): void {
      const t = now();
      if (t - last < interval) return;
      last = t;
      io.stderr(line(c));
      drawn = io.isTTY;
    },
    /** Prints a message line (an error) without mangling the bar. */
    message(text: string): void {
      clear();
      io.stderr(text + '\n');
    },
    /** Removes the bar. */
    done(): void {
      clear();
    },
    elapsedSeconds: () => (now() - started) / 1000,
  };
}

/**
 * Progress of a task whose total is not known beforehand (`cinder expunge`, `cinder audit prune`) on
 * stderr: `expunge: 12,345 versions removed, 4,100/s (Observation)`, redrawn in place on a terminal (at
 * most every 100 ms), a plain line every few seconds otherwise, as createProgress does.
 */
export function createTally(io: CliIO, task: string, unit: string, now: () => number = () => performance.now()) {
  const started = now();
  const interval = io.isTTY ? 100 : 5000;
  let last = started;
  let drawn = false;
  return {
    update(n: number, note?: string): void {
      const t = now();
      if (t - last < interval) return;
      last = t;
      const seconds = (t - started) / 1000;
      const text = `${task}: ${formatCount(n)} ${unit}, ${formatCount(seconds > 0 ? n / seconds : 0)}/s${note ? ` (${note})` : ''}`;
      io.stderr(io.isTTY ? `\r\x1b[2K${text}` : `${text}\n`);
      drawn = io.isTTY;
    },
    done(): void {
      if (drawn) io.stderr('\r\x1b[2K');
      drawn = false;
    },
    elapsedSeconds: () => (now() - started) / 1000,
  };
}
