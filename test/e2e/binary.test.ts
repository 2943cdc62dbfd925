/**
 * End-to-end: the compiled executable `dist/cinder` (`bun run build`), as a user runs it.
 * Without the binary these tests are skipped with a notice, except under CI=true, where they fail.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BASE, createTestApp } from '../helpers/app.ts';
import { storeTargets, type StoreTarget } from '../helpers/stores.ts';

const BIN = resolve(import.meta.dir, '../../dist/cinder');
const present = existsSync(BIN);

if (!present) {
  if (process.env.CI === 'true') {
    test('dist/cinder exists under CI', () => {
      throw new Error(`${BIN} is missing: run \`bun run build\` before the e2e tests`);
    });
  } else {
    console.warn(`NOTICE: ${BIN} not found; skipping the binary e2e tests (run \`bun run build\` first).`);
  }
} else {
  const src = resolve(import.meta.dir, '../../src');
  const newest = Math.max(...[...new Bun.Glob('**/*.ts').scanSync(src)].map((f) => statSync(join(src, f)).mtimeMs));
  if (newest > statSync(BIN).mtimeMs) console.warn(`NOTICE: ${BIN} is older than src/; these tests run the old build (run \`bun run build\`).`);
}

/** A port nothing listens on right now. */
function freePort(): number {
  const probe = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() });
  const port = probe.port!;
  probe.stop(true);
  return port;
}

/** Polls /healthz until it answers 200 (true) or 10 s pass (false). */
async function healthy(base: string): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    if (await fetch(`${base}/healthz`).then((r) => r.ok, () => false)) return true;
    await Bun.sleep(100);
  }
  return false;
}

async function readUntil(stream: ReadableStream<Uint8Array>, done: (text: string) => boolean, ms: number): Promise<string> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const deadline = Date.now() + ms;
  while (!done(text)) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`timed out waiting for output; got:\n${text}`);
    const next = await Promise.race([reader.read(), Bun.sleep(left).then(() => null)]);
    if (!next || next.done) throw new Error(`output ended early:\n${text}`);
    text += decoder.decode(next.value, { stream: true });
  }
  reader.releaseLock();
  return text;
}

describe.if(present)('dist/cinder', () => {
  const port = freePort();
  const base = `http://127.0.0.1:${port}`;
  // Made in beforeAll: a skipped describe still runs its body, but never its hooks.
  let dir = '';
  let env: Record<string, string> = {};
  let server: ReturnType<typeof Bun.spawn<'ignore', 'pipe', 'pipe'>>;
  let banner = '';
  let logs: Promise<string>;

  /** Runs a one-shot command of the binary against the same data directory. */
  async function cinder(...args: string[]) {
    const p = Bun.spawn([BIN, ...args], { env, cwd: dir, stdout: 'pipe', stderr: 'pipe' });
    const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    return { code, stdout, stderr };
  }

  async function token(clientId: string, secret: string, scope = 'system/*.*'): Promise<string> {
    const res = await fetch(`${base}/oauth2/token`, {
      method: 'POST',
      headers: { Authorization: 'Basic ' + btoa(`${clientId}:${secret}`), 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', scope }),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { access_token: string }).access_token;
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cinder-e2e-'));
    env = { PATH: process.env.PATH ?? '', HOME: dir, CINDER_PORT: String(port), CINDER_BASE_URL: base, CINDER_DATA_DIR: join(dir, 'data') };
    server = Bun.spawn([BIN], { env, cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
    logs = new Response(server.stderr).text();
    banner = await readUntil(server.stdout, (t) => t.includes('token URL:'), 20_000);
    if (!(await healthy(base))) throw new Error(`server did not become healthy; logs:\n${await logs}`);
  }, 30_000);

  afterAll(async () => {
    if (server.exitCode === null) server.kill('SIGKILL');
    await server.exited;
    rmSync(dir, { recursive: true, force: true });
  });

  test('--help lists the commands', async () => {
    const r = await cinder('--help');
    expect(r.code).toBe(0);
    for (const c of ['serve', 'tenant create', 'client create', 'import', 'migrate', 'healthcheck', 'backup', 'restore', 'check', 'compact']) expect(r.stdout).toContain(c);
  });

  test('first start prints the admin credentials once; token -> create -> search -> read, and core terminology, over HTTP', async () => {
    const clientId = /client_id:\s+(\S+)/.exec(banner)?.[1];
    const secret = /client_secret:\s+(\S+)/.exec(banner)?.[1];
    expect(banner).toContain(`Cinder initialised ${join(dir, 'data')}.`);
    expect(banner).toContain(`FHIR base:     ${base}/tenants/default/fhir/R4`);
    expect(clientId && secret).toBeTruthy();
    const access = await token(clientId!, secret!);
    const fhir = `${base}/tenants/default/fhir/R4`;
    const auth = { Authorization: `Bearer ${access}` };

    const created = await fetch(`${fhir}/Patient`, {
      method: 'POST',
      headers: { ...auth, 'Content-Type': 'application/fhir+json' },
      body: JSON.stringify({ resourceType: 'Patient', identifier: [{ system: 'urn:e2e', value: 'bin-1' }], name: [{ family: 'Binary' }] }),
    });
    expect(created.status).toBe(201);
    const location = created.headers.get('Location')!;
    expect(location).toMatch(new RegExp(`^${fhir}/Patient/[A-Za-z0-9.-]+/_history/1$`));
    const id = location.split('/')[location.split('/').indexOf('Patient') + 1]!;

    const search = await fetch(`${fhir}/Patient?identifier=urn:e2e|bin-1`, { headers: auth });
    expect(search.status).toBe(200);
    const bundle = (await search.json()) as { type: string; entry: { resource: { id: string } }[] };
    expect(bundle.type).toBe('searchset');
    expect(bundle.entry.map((e) => e.resource.id)).toEqual([id]);
    // Full text: the SQLite inside the executable has FTS5, and the words of a create are found at once.
    const text = await fetch(`${fhir}/Patient?_content=binar*&_total=accurate`, { headers: auth });
    expect(text.status).toBe(200);
    expect(((await text.json()) as { total: number }).total).toBe(1);

    const read = await fetch(`${fhir}/Patient/${id}`, { headers: auth });
    expect(read.status).toBe(200);
    expect(read.headers.get('ETag')).toBe('W/"1"');
    expect(((await read.json()) as { name: unknown }).name).toEqual([{ family: 'Binary' }]);

    expect((await fetch(`${fhir}/Patient/${id}`)).status).toBe(401);

    // The R4 core terminology is embedded in the executable.
    const validate = await fetch(`${fhir}/ValueSet/$validate-code`, {
      method: 'POST',
      headers: { ...auth, 'Content-Type': 'application/fhir+json' },
      body: JSON.stringify({
        resourceType: 'Parameters',
        parameter: [
          { name: 'url', valueUri: 'http://hl7.org/fhir/ValueSet/administrative-gender' },
          { name: 'code', valueCode: 'female' },
          { name: 'system', valueUri: 'http://hl7.org/fhir/administrative-gender' },
        ],
      }),
    });
    expect(validate.status).toBe(200);
    const out = (await validate.json()) as { parameter: { name: string; valueBoolean?: boolean; valueString?: string }[] };
    expect(out.parameter.find((p) => p.name === 'result')?.valueBoolean).toBe(true);
    expect(out.parameter.find((p) => p.name === 'display')?.valueString).toBe('Female');
  });

  test('metadata: the statement served from what the build computed is the one the code computes at run time', async () => {
    // Its per-type entries come from the executable's prebuilt parts (scripts/build.ts); from source they are computed.
    const t = await createTestApp();
    try {
      const asComputed = (text: string, origin: string, tenant: string) => {
        const statement = JSON.parse(text.replaceAll(origin, BASE).replaceAll(origin.replace(/^http/, 'ws'), BASE.replace(/^http/, 'ws')).replaceAll(`/tenants/${tenant}/`, '/tenants/t1/')) as Record<string, unknown>;
        delete statement.date;
        return statement;
      };
      for (const query of ['', '?_summary=true', '?_elements=rest']) {
        const served = await fetch(`${base}/tenants/default/fhir/R4/metadata${query}`);
        expect(served.status).toBe(200);
        const computed = await t.request(`${t.fhir('t1')}/metadata${query}`);
        expect(computed.status).toBe(200);
        const statement = asComputed(await served.text(), base, 'default');
        expect((statement.rest as { resource: unknown[] }[])[0]!.resource.length).toBeGreaterThan(140);
        expect(statement).toEqual(asComputed(await computed.text(), BASE, 't1'));
      }
    } finally {
      await t.close();
    }
  });

  test('tenant create, client create --json and import work beside the running server', async () => {
    const tenant = await cinder('tenant', 'create', 'e2e');
    expect(tenant.code).toBe(0);
    expect(tenant.stdout).toContain(`fhir_base: ${base}/tenants/e2e/fhir/R4`);

    const client = await cinder('client', 'create', '--tenant', 'e2e', '--scope', 'system/*.rs', '--json');
    expect(client.code).toBe(0);
    const created = JSON.parse(client.stdout) as { client_id: string; client_secret: string; tenant: string };
    expect(created.tenant).toBe('e2e');

    const file = join(dir, 'import.ndjson');
    writeFileSync(file, [{ resourceType: 'Patient', id: 'imp-1' }, { resourceType: 'Observation', id: 'obs-1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/imp-1' } }].map((r) => JSON.stringify(r)).join('\n') + '\nnot json\n');
    const imported = await cinder('import', '--tenant', 'e2e', '--json', file);
    expect(imported.code).toBe(1);
    expect(JSON.parse(imported.stdout)).toMatchObject({ imported: 2, failed: 1, errors: [{ file, line: 3 }] });
    expect(imported.stderr).toContain(`${file}:3: malformed JSON`);

    const access = await token(created.client_id, created.client_secret, 'system/*.rs');
    const res = await fetch(`${base}/tenants/e2e/fhir/R4/Observation?patient=imp-1`, { headers: { Authorization: `Bearer ${access}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { entry: { resource: { id: string } }[] }).entry.map((e) => e.resource.id)).toEqual(['obs-1']);
  });

  test('a bulk export runs on the worker threads embedded in the executable: kick-off, poll, download', async () => {
    const client = JSON.parse((await cinder('client', 'create', '--tenant', 'e2e', '--scope', 'system/*.read', '--json')).stdout) as {
      client_id: string;
      client_secret: string;
    };
    const auth = { Authorization: `Bearer ${await token(client.client_id, client.client_secret, 'system/*.read')}` };
    const kickoff = await fetch(`${base}/tenants/e2e/fhir/R4/Patient/$export?_type=Patient,Observation`, { headers: auth });
    expect(kickoff.status).toBe(202);
    const status = kickoff.headers.get('Content-Location')!;
    let res = await fetch(status, { headers: auth });
    for (let i = 0; i < 150 && res.status === 202; i++) {
      await Bun.sleep(200);
      res = await fetch(status, { headers: auth });
    }
    expect(res.status).toBe(200);
    const manifest = (await res.json()) as { requiresAccessToken: boolean; output: { type: string; url: string; count: number }[] };
    expect(manifest.requiresAccessToken).toBe(true);
    expect(manifest.output.map((o) => [o.type, o.count]).sort()).toEqual([['Observation', 1], ['Patient', 1]]);
    const file = await fetch(manifest.output.find((o) => o.type === 'Observation')!.url, { headers: auth });
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toStartWith('application/fhir+ndjson');
    expect(JSON.parse((await file.text()).trim())).toMatchObject({ resourceType: 'Observation', id: 'obs-1' });
  });

  test('migrate reports nothing pending; healthcheck finds the server', async () => {
    const migrate = await cinder('migrate', '--json');
    expect(migrate.code).toBe(0);
    expect(JSON.parse(migrate.stdout)).toEqual({ database: 'sqlite', applied: [] });
    expect((await cinder('healthcheck')).code).toBe(0);
  });

  test('backup and check beside the running server; compact is refused while it runs', async () => {
    const out = join(dir, 'backup.db');
    const backup = await cinder('backup', '--out', out, '--json');
    expect(backup.stderr).toBe('');
    expect(backup.code).toBe(0);
    expect(JSON.parse(backup.stdout)).toMatchObject({ path: out, integrity: 'ok' });
    expect((await cinder('check')).code).toBe(0);
    const copy = Bun.spawn([BIN, 'check', '--json'], { env: { ...env, CINDER_DATABASE_URL: out }, cwd: dir, stdout: 'pipe', stderr: 'pipe' });
    expect(JSON.parse(await new Response(copy.stdout).text())).toMatchObject({ healthy: true, problems: [] });
    expect(await copy.exited).toBe(0);
    const compact = await cinder('compact');
    expect(compact.code).toBe(1);
    expect(compact.stderr).toContain('is in use by another process');
  });

  test('SIGTERM drains and exits with code 0', async () => {
    server.kill('SIGTERM');
    const code = await Promise.race([server.exited, Bun.sleep(10_000).then(() => 'timeout')]);
    expect(code).toBe(0);
    expect(await logs).toContain('"msg":"stopped"');
    expect((await cinder('healthcheck', '--timeout', '500')).code).toBe(1);
  });

  test('compact once the server stopped', async () => {
    const compact = await cinder('compact', '--json');
    expect(compact.stderr).toBe('');
    expect(compact.code).toBe(0);
    expect(JSON.parse(compact.stdout)).toMatchObject({ database: join(dir, 'data', 'cinder.db'), page_size: 16384 });
    expect((await cinder('check')).code).toBe(0);
  });

  test('a second start on the same data directory prints no credentials', async () => {
    const again = Bun.spawn([BIN, 'serve'], { env, cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr: 'ignore' });
    const stdout = new Response(again.stdout).text();
    const up = await healthy(base);
    again.kill('SIGTERM');
    expect([up, await again.exited]).toEqual([true, 0]);
    expect(await stdout).toBe('');
  });
});

/** PostgreSQL targets (a fresh database each), when the binary is there; unreachable: see storeTargets(). */
const targets: StoreTarget[] = present ? await storeTargets({ main: false }) : [];
const postgresTarget = targets.find((t) => t.kind === 'postgres');
if (!postgresTarget) for (const t of targets) await t.cleanup();

describe.if(!!postgresTarget)('dist/cinder on PostgreSQL', () => {
  let dir = '';
  let env: Record<string, string> = {};

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cinder-e2e-pg-'));
    env = { PATH: process.env.PATH ?? '', HOME: dir, CINDER_DATA_DIR: join(dir, 'data'), CINDER_DATABASE_URL: (await postgresTarget!.fresh()).url };
  }, 30_000);

  afterAll(async () => {
    for (const t of targets) await t.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  async function cinder(...args: string[]) {
    const p = Bun.spawn([BIN, ...args], { env, cwd: dir, stdout: 'pipe', stderr: 'pipe' });
    const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    return { code, stdout, stderr };
  }

  test('migrate, tenant create, import and a server answering /readyz, all on a postgres:// URL', async () => {
    const migrate = await cinder('migrate', '--json');
    expect(migrate.code).toBe(0);
    const applied = JSON.parse(migrate.stdout) as { database: string; applied: string[] };
    expect(applied.database).toBe('postgres');
    expect(applied.applied[0]).toBe('1_core');
    expect((await cinder('tenant', 'create', 'pg')).code).toBe(0);
    const file = join(dir, 'pg.ndjson');
    writeFileSync(file, JSON.stringify({ resourceType: 'Patient', id: 'pg-1' }) + '\n');
    const imported = await cinder('import', '--tenant', 'pg', '--json', file);
    expect([imported.code, JSON.parse(imported.stdout).imported]).toEqual([0, 1]);

    const port = freePort();
    const server = Bun.spawn([BIN, 'serve', '--port', String(port)], { env, cwd: dir, stdin: 'ignore', stdout: 'ignore', stderr: 'ignore' });
    try {
      expect(await healthy(`http://127.0.0.1:${port}`)).toBe(true);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect([ready.status, await ready.json()]).toEqual([200, { status: 'ok', database: 'postgres', exportStorage: 'postgres' }]);

      // An export on the embedded workers into the default storage on PostgreSQL: the database itself.
      const client = JSON.parse((await cinder('client', 'create', '--tenant', 'pg', '--scope', 'system/*.read', '--json')).stdout) as {
        client_id: string;
        client_secret: string;
      };
      const tokenRes = await fetch(`http://127.0.0.1:${port}/oauth2/token`, {
        method: 'POST', body: new URLSearchParams({ grant_type: 'client_credentials' }),
        headers: { Authorization: 'Basic ' + btoa(`${client.client_id}:${client.client_secret}`), 'Content-Type': 'application/x-www-form-urlencoded' },
      });
      const auth = { Authorization: `Bearer ${((await tokenRes.json()) as { access_token: string }).access_token}` };
      const kickoff = await fetch(`http://127.0.0.1:${port}/tenants/pg/fhir/R4/$export?_type=Patient`, { headers: auth });
      expect(kickoff.status).toBe(202);
      const status = kickoff.headers.get('Content-Location')!.replace(/^http:\/\/localhost:\d+/, `http://127.0.0.1:${port}`);
      let res = await fetch(status, { headers: auth });
      for (let i = 0; i < 150 && res.status === 202; i++) {
        await Bun.sleep(200);
        res = await fetch(status, { headers: auth });
      }
      expect(res.status).toBe(200);
      const manifest = (await res.json()) as { output: { url: string }[] };
      const file = await fetch(manifest.output[0]!.url.replace(/^http:\/\/localhost:\d+/, `http://127.0.0.1:${port}`), { headers: auth });
      expect(JSON.parse((await file.text()).trim())).toMatchObject({ resourceType: 'Patient', id: 'pg-1' });
      expect(existsSync(join(dir, 'data', 'exports'))).toBe(false);
    } finally {
      server.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    }
  });
});
