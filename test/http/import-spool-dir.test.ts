/**
 * `$import` downloads its inputs into `<CINDER_DATA_DIR>/import-spool`, not the system's temporary directory (often
 * tmpfs in a container): into a directory of the runner's own, readable by the server's user only, and the first job
 * removes what ended processes of this host left there (and nothing of another host's, nor a live neighbour's whose pid
 * this process cannot see: a container of its own on a shared volume). On both databases.
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { createLogger } from '../../src/log.ts';
import * as spoolFiles from '../../src/import/spool.ts';

const host = hostname().replace(/[^A-Za-z0-9.]/g, '_') || 'host';
/** An hour ago: a runner's directory untouched this long is an ended one's if its pid says so (spool.ts STALE_MS: 5 minutes). */
const HOUR_AGO = () => Date.now() - 3600_000;
/** A minute ago: within a live runner's heartbeat (spool.ts HEARTBEAT_MS). */
const MINUTE_AGO = () => Date.now() - 60_000;
const line = (id: string) => JSON.stringify({ resourceType: 'Patient', id }) + '\n';

/** Serves one line, then holds the rest of the body until `release()`. */
function heldInput() {
  let release!: () => void;
  let released = new Promise<void>((r) => (release = r));
  const server = Bun.serve({
    port: 0, hostname: '127.0.0.1',
    fetch: () => new Response(new ReadableStream({
      async start(c) {
        c.enqueue(new TextEncoder().encode(line('s1')));
        await released;
        c.enqueue(new TextEncoder().encode(line('s2')));
        c.close();
      },
    })),
  });
  return {
    url: `http://127.0.0.1:${server.port}/p.ndjson`,
    release: () => release(),
    rearm: () => void (released = new Promise<void>((r) => (release = r))),
    stop: () => server.stop(true),
  };
}

/** A pid no process holds: one of a process that has exited. */
async function deadPid(): Promise<number> {
  const proc = Bun.spawn(['true']);
  await proc.exited;
  return proc.pid;
}

/** Plants in `spool` the directory `dir` of a runner, holding a download, last touched at `touched`; its path. */
function plant(spool: string, dir: string, touched: number): string {
  const path = join(spool, dir);
  mkdirSync(path, { recursive: true });
  writeFileSync(join(path, 'cinder-import-old-job-abcd1234-0.ndjson'), line('left'));
  utimesSync(path, new Date(touched), new Date(touched));
  return path;
}

/** The directories in `spool` of this process's runners. */
const ownDirs = (spool: string) => readdirSync(spool).filter((d) => d.startsWith(`${host}-${process.pid}-`));

const files = heldInput();
afterAll(() => files.stop());

await eachStore((kind, fresh) => {
  describe(`the import spool (${kind})`, () => {
    let t: TestApp;
    let token: string;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
    });
    afterAll(async () => {
      await t.app.imports.stop();
      await t.close();
    });

    test("downloads go to the data directory's spool, the server's user's only; an ended process's leftovers go, another host's and a live neighbour's stay", async () => {
      const spool = join(t.dir, 'import-spool');
      // An older spool open to all, what two ended processes of this host left (one of them an earlier process of
      // this very pid, as in a container whose server is always pid 1), and another host's runner on a shared volume.
      mkdirSync(spool, { mode: 0o755 });
      const ended = `${host}-${await deadPid()}-dead0001`;
      const earlier = `${host}-${process.pid}-dead0002`;
      const elsewhere = `another.host-${process.pid}-live0003`;
      for (const dir of [ended, earlier, elsewhere]) plant(spool, dir, HOUR_AGO());
      // Live runners of containers that share this volume and host name, each in a pid namespace of its own (this
      // process sees none of their pids; one is pid 1 there as this one may be here): their heartbeat is recent.
      const neighbour = `${host}-${await deadPid()}-live0004`;
      const neighbourSamePid = `${host}-${process.pid}-live0005`;
      for (const dir of [neighbour, neighbourSamePid]) plant(spool, dir, MINUTE_AGO());

      files.rearm();
      const kick = await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', {
        resourceType: 'Parameters',
        parameter: [{ name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: files.url }] }],
      }));
      expect(kick.status).toBe(202);
      const status = kick.headers.get('content-location')!;
      const job = status.slice(status.lastIndexOf('/') + 1);
      const ran = t.app.imports.runOnce();

      // While the input downloads: its file is in this runner's directory of the spool, and nowhere in the system's temporary directory.
      const ownPrefix = `${host}-${process.pid}-`;
      let download: string | undefined;
      for (let i = 0; i < 200 && download === undefined; i++) {
        await Bun.sleep(25);
        for (const dir of readdirSync(spool).filter((d) => d.startsWith(ownPrefix) && d !== earlier && d !== neighbourSamePid)) {
          const name = readdirSync(join(spool, dir)).find((f) => f.includes(job));
          if (name) download = join(spool, dir, name);
        }
      }
      expect(download).toBeString();
      expect(readdirSync(tmpdir()).filter((f) => f.includes(job))).toEqual([]);
      expect(statSync(spool).mode & 0o777).toBe(0o700);
      expect(statSync(join(download!, '..')).mode & 0o777).toBe(0o700);
      expect(statSync(download!).mode & 0o777).toBe(0o600);
      // Leftovers of ended processes of this host are gone; another host's runner is not this one's to judge.
      expect(existsSync(join(spool, ended))).toBe(false);
      expect(existsSync(join(spool, earlier))).toBe(false);
      expect(readdirSync(join(spool, elsewhere))).toHaveLength(1);
      expect(readdirSync(join(spool, neighbour))).toHaveLength(1);
      expect(readdirSync(join(spool, neighbourSamePid))).toHaveLength(1);

      files.release();
      expect(await ran).toBe(1);
      const res = await t.request(status, fhirInit(token));
      expect(res.status).toBe(200);
      expect(((await res.json()) as { output: { count: number }[] }).output[0]!.count).toBe(2);
      // Imported: the download is removed.
      expect(existsSync(download!)).toBe(false);
    });

    test('a server that starts removes what ended processes left, before any import', async () => {
      const other = await createTestApp({ store: await fresh(), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      try {
        const spool = join(other.dir, 'import-spool');
        const ended = plant(spool, `${host}-${await deadPid()}-dead0004`, HOUR_AGO());
        other.app.imports.start();
        // The leftovers are removed first, then the runner's own directory is made: wait for both.
        const own = () => ownDirs(spool);
        // However long a loaded machine takes (the test's timeout bounds the waits here).
        while (existsSync(ended) || own().length === 0) await Bun.sleep(20);
        expect(existsSync(ended)).toBe(false);
        expect(own()).toHaveLength(1);
      } finally {
        await other.app.imports.stop();
        await other.close();
      }
    });

    test('a directory of a process that ended just before the start is kept while fresh, and removed by a later sweep', async () => {
      const other = await createTestApp({ store: await fresh(), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      try {
        const spool = join(other.dir, 'import-spool');
        const recent = plant(spool, `${host}-${await deadPid()}-dead0006`, MINUTE_AGO());
        other.app.imports.start();
        const own = () => ownDirs(spool);
        while (own().length === 0) await Bun.sleep(20);
        expect(own()).toHaveLength(1);
        // Touched a minute ago: its pid may be one this process cannot see (another container's), so it stays for now.
        await Bun.sleep(600);
        expect(existsSync(recent)).toBe(true);
        // Untouched since: the sweep after the next ten minutes removes it.
        utimesSync(recent, new Date(HOUR_AGO()), new Date(HOUR_AGO()));
        other.clock.advance(11 * 60_000);
        while (existsSync(recent)) await Bun.sleep(20);
        expect(existsSync(recent)).toBe(false);
        expect(own()).toHaveLength(1);
      } finally {
        await other.app.imports.stop();
        await other.close();
      }
    });

    test('a spool that cannot be made is logged once while it lasts, no job is claimed meanwhile, and jobs run once it can', async () => {
      const lines: { level: string; msg: string; tries?: number }[] = [];
      const log = createLogger('info', {}, (l) => lines.push(JSON.parse(l)));
      const other = await createTestApp({ store: await fresh(), log, env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      // The runner's tries to open its spool (each poll's, counted as it begins).
      const opens = spyOn(spoolFiles, 'openSpool');
      const tries = () => opens.mock.calls.filter(([dir]) => dir === other.dir).length;
      try {
        // What stands where the spool should be (a file: as a read-only or full data directory, mkdir fails).
        const spool = join(other.dir, 'import-spool');
        writeFileSync(spool, 'not a directory');
        let token = await other.token();
        files.rearm();
        files.release();
        const kick = await other.request(`${other.fhir()}/$import`, fhirInit(token, 'POST', {
          resourceType: 'Parameters',
          parameter: [{ name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: files.url }] }],
        }));
        expect(kick.status).toBe(202);
        const status = kick.headers.get('content-location')!;
        other.app.imports.start();
        // The try at start and four polls of the runner (every 500 ms), each trying the spool again, however long a
        // loaded machine takes to make them.
        while (tries() < 5) await Bun.sleep(20);
        const failures = () => lines.filter((l) => l.level === 'error' && l.msg.startsWith('import spool not usable'));
        expect(failures()).toHaveLength(1);
        expect((await other.request(status, fhirInit(token))).status).toBe(202);
        // Told again after ten minutes, with the tries since (at least the four polls that were not told, the last
        // of them maybe told now).
        other.clock.advance(10 * 60_000 + 1);
        while (failures().length < 2) await Bun.sleep(20);
        expect(failures()).toHaveLength(2);
        expect(failures()[1]!.tries).toBeGreaterThanOrEqual(4);
        // Usable again: the job runs.
        rmSync(spool);
        token = await other.token();
        let res = await other.request(status, fhirInit(token));
        while (res.status === 202) {
          await Bun.sleep(50);
          res = await other.request(status, fhirInit(token));
        }
        expect(res.status).toBe(200);
        expect(lines.some((l) => l.msg.startsWith('import spool usable again'))).toBe(true);
        expect(failures()).toHaveLength(2);
      } finally {
        opens.mockRestore();
        await other.app.imports.stop();
        await other.close();
      }
    });

    test("a runner's directory removed while the server runs (an operator freeing disk) is made again by the next download", async () => {
      const other = await createTestApp({ store: await fresh(), env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      try {
        const token = await other.token();
        const spool = join(other.dir, 'import-spool');
        const importOne = async () => {
          files.rearm();
          files.release();
          const kick = await other.request(`${other.fhir()}/$import`, fhirInit(token, 'POST', {
            resourceType: 'Parameters',
            parameter: [{ name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: files.url }] }],
          }));
          expect(kick.status).toBe(202);
          expect(await other.app.imports.runOnce()).toBe(1);
          return other.request(kick.headers.get('content-location')!, fhirInit(token));
        };
        expect((await importOne()).status).toBe(200);
        rmSync(spool, { recursive: true, force: true });
        const res = await importOne();
        expect(res.status).toBe(200);
        expect(((await res.json()) as { output: { count: number }[] }).output[0]!.count).toBe(2);
        expect(statSync(spool).mode & 0o777).toBe(0o700);
        for (const dir of readdirSync(spool)) expect(statSync(join(spool, dir)).mode & 0o777).toBe(0o700);
      } finally {
        await other.close();
      }
    });
  });
});
