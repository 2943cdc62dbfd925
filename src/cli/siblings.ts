import type { Logger } from '../log.ts';

/** The environment variable that makes `cinder serve` a sibling of a first process (internal). */
export const SIBLING_ENV = 'CINDER_SERVE_SIBLING';

/** How long a stopping sibling may drain before it is killed. */
const STOP_GRACE_MS = 30_000;
/** Pause before a sibling that died unexpectedly is started again. */
const RESTART_DELAY_MS = 1_000;

/**
 * The command line that runs this program again: the compiled executable is itself; from source,
 * Bun with the entry script.
 */
export function selfCommand(args: string[]): string[] {
  const compiled = Bun.main.startsWith('/$bunfs/') || Bun.main.includes('~BUN');
  return compiled ? [process.execPath, ...args] : [process.execPath, Bun.main, ...args];
}

export interface Siblings {
  /** SIGTERM to every sibling, then waits until they have drained (killing any still running after 30 s). */
  stop(): Promise<void>;
}

/**
 * Runs `count` more `cinder serve` processes on the same port (SO_REUSEPORT: the kernel spreads
 * connections over all of them), configured by `env` (every setting, resolved by the first process).
 * A sibling that dies is started again after a second. Each sibling holds a pipe to this process on
 * its stdin and stops when it closes, so none outlives the first process, even one killed by SIGKILL.
 */
export function startSiblings(o: { count: number; env: Record<string, string | undefined>; log: Logger }): Siblings {
  const running = new Map<number, ReturnType<typeof spawn>>();
  let stopping = false;

  function spawn(slot: number) {
    const child = Bun.spawn(selfCommand(['serve']), {
      env: { ...o.env, [SIBLING_ENV]: String(slot) },
      stdin: 'pipe',
      stdout: 'inherit',
      stderr: 'inherit',
    });
    running.set(slot, child);
    void child.exited.then((code) => {
      if (running.get(slot) === child) running.delete(slot);
      if (stopping) return;
      o.log.warn('server process exited; starting it again', { slot, pid: child.pid, code });
      restart(slot);
    });
    return child;
  }

  /** Starts `slot` again after RESTART_DELAY_MS; a start that fails (no process could be made) is tried again. */
  function restart(slot: number) {
    setTimeout(() => {
      if (stopping) return;
      try {
        spawn(slot);
      } catch (err) {
        o.log.error('starting a server process failed; trying again', { slot, err });
        restart(slot);
      }
    }, RESTART_DELAY_MS).unref();
  }

  for (let slot = 1; slot <= o.count; slot++) spawn(slot);

  return {
    async stop() {
      stopping = true;
      const children = [...running.values()];
      for (const c of children) c.kill('SIGTERM');
      await Promise.all(children.map(async (c) => {
        const timer = setTimeout(() => c.kill('SIGKILL'), STOP_GRACE_MS);
        await c.exited;
        clearTimeout(timer);
      }));
    },
  };
}
