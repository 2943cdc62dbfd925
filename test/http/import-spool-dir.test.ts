/**
 * `$import` downloads its inputs into `<CINDER_DATA_DIR>/import-spool`, not the system's temporary directory (often
 * tmpfs in a container): into a directory of the runner's own, readable by the server's user only, and the first job
 * removes what ended processes of this host left there (and nothing of another host's). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';

const host = hostname().replace(/[^A-Za-z0-9.]/g, '_') || 'host';
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

    test("downloads go to the data directory's spool, the server's user's only; an ended process's leftovers go, another host's stay", async () => {
      const spool = join(t.dir, 'import-spool');
      // An older spool open to all, what two ended processes of this host left (one of them an earlier process of
      // this very pid, as in a container whose server is always pid 1), and another host's runner on a shared volume.
      mkdirSync(spool, { mode: 0o755 });
      const plant = (dir: string) => {
        mkdirSync(join(spool, dir));
        writeFileSync(join(spool, dir, 'cinder-import-old-job-abcd1234-0.ndjson'), line('left'));
      };
      const ended = `${host}-${await deadPid()}-dead0001`;
      const earlier = `${host}-${process.pid}-dead0002`;
      const elsewhere = `another.host-${process.pid}-live0003`;
      for (const dir of [ended, earlier, elsewhere]) plant(dir);

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
        for (const dir of readdirSync(spool).filter((d) => d.startsWith(ownPrefix) && d !== earlier)) {
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
        const ended = join(spool, `${host}-${await deadPid()}-dead0004`);
        mkdirSync(ended, { recursive: true });
        writeFileSync(join(ended, 'cinder-import-old-job-abcd1234-0.ndjson'), line('left'));
        other.app.imports.start();
        // The leftovers are removed first, then the runner's own directory is made: wait for both.
        const own = () => readdirSync(spool).filter((d) => d.startsWith(`${host}-${process.pid}-`));
        for (let i = 0; i < 100 && (existsSync(ended) || own().length === 0); i++) await Bun.sleep(20);
        expect(existsSync(ended)).toBe(false);
        expect(own()).toHaveLength(1);
      } finally {
        await other.app.imports.stop();
        await other.close();
      }
    });
  });
});
