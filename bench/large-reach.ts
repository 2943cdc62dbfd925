/**
 * Peak memory and time of the reads of large resources that judge a patient-context token's reach, in process, a
 * fresh process per measurement, checkouts compared in paired rounds (A B, then B A):
 *
 * - `integrity`: with CINDER_REFERENTIAL_INTEGRITY=on, a `patient/*.cruds` token of Patient/pa creates an Observation
 *   whose `derivedFrom` names pa's DocumentReference of `--mib` MiB of base64 (the check read and parsed the target).
 * - `history-patient`: that token reads the instance `_history` of the DocumentReference, `--versions` versions of
 *   `--mib` MiB each (every version judged on its compartment), the response's body drained chunk by chunk.
 * - `history`: the admin token reads the same page (no version judged: what the page itself costs).
 * - `read-patient`: the patient token reads the DocumentReference (its one version judged on its compartment).
 * - `vread-patient`: the patient token reads the DocumentReference's current version by its number (`_history/1`).
 * - `meta`: the admin token's instance `$meta` of the DocumentReference (a Parameters of its meta alone).
 * - `meta-patient`: the patient token's instance `$meta` of it.
 * - `delete-patient`: the patient token deletes the DocumentReference (the stored version judged on its compartment).
 * - `export`: `--versions` DocumentReferences of `--mib` MiB, a system export of the type kicked off, each of them changed
 *   after its transactionTime (so that the versions exported are judged in code, src/export/select.ts recheck); the job
 *   run (`runExports`, its page of 2,000 rows holding them all) is what is measured.
 * - `audit`: with CINDER_AUDIT=on, the admin token reads the DocumentReference; the trail's flush of the read's
 *   AuditEvent (naming the patients whose compartment holds it) is what is measured.
 *
 *   ulimit -v 4000000; bun bench/large-reach.ts [--mib 30] [--versions 4] [--rounds 2] [--store sqlite|postgres|both]
 *     [--kinds integrity,history-patient,history,read-patient,vread-patient,meta,meta-patient,delete-patient,export,audit] [--roots /path/A,/path/B]
 *
 * Each checkout runs with its own test helpers (`test/helpers/app.ts`, a store of `test/helpers/stores.ts`). The app is
 * warmed up with a small request of the kind, collected, and its peak RSS (VmHWM) reset (Linux `clear_refs` 5) before
 * the request measured; the figure is the peak above the RSS just before, the request's body included.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { benchDatabase, storeKinds, type StoreKind } from './lib/databases.ts';

type Json = Record<string, any>;
const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};
const mib = Number(arg('--mib', '30'));
const versions = Number(arg('--versions', '4'));
const status = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;
const base64 = (bytes: number) => randomBytes(bytes - (bytes % 3)).toString('base64');

const document = (id: string, data: string, status = 'current'): Json => ({
  resourceType: 'DocumentReference', id, status, subject: { reference: 'Patient/pa' },
  content: [{ attachment: { contentType: 'application/pdf', data } }],
});
const observation = (target: string): Json => ({
  resourceType: 'Observation', status: 'final', code: { text: 'bench' }, subject: { reference: 'Patient/pa' }, derivedFrom: [{ reference: `DocumentReference/${target}` }],
});

/** One measurement in this process: the checkout at `root`, on a new database of `kind`. */
async function child(kind: string, root: string, store: StoreKind): Promise<void> {
  const { createTestApp } = await import(`${root}/test/helpers/app.ts`);
  const { craftToken } = await import(`${root}/test/helpers/fhir.ts`);
  const { kickOff, runExports } = await import(`${root}/test/helpers/export.ts`);
  const db = await benchDatabase(root, store);
  const t = await createTestApp({
    store: db.open(),
    env: { CINDER_REFERENTIAL_INTEGRITY: kind === 'integrity' ? 'on' : 'off', CINDER_AUDIT: kind === 'audit' ? 'on' : 'off', CINDER_AUDIT_FLUSH_MS: '60000', CINDER_MAX_BODY_BYTES: String(256 << 20), CINDER_MAX_RESOURCE_BYTES: String(256 << 20) },
  });
  const admin = await t.token();
  const patient = await craftToken(t, 'patient/*.cruds', { patient: 'pa' });
  const call = async (method: string, path: string, body: unknown, token: string, want: number) => {
    const res: Response = await t.request(`${t.fhir()}/${path}`, {
      method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json', Prefer: 'return=minimal' },
      ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    let bytes = 0;
    for await (const chunk of res.body ?? []) bytes += (chunk as Uint8Array).byteLength;
    if (res.status !== want) throw new Error(`${method} ${path}: expected ${want}, got ${res.status}`);
    return bytes;
  };
  try {
    await call('PUT', 'Patient/pa', { resourceType: 'Patient', id: 'pa' }, admin, 201);
    const large = base64(mib * 1024 * 1024);
    for (let v = 0; v < (kind.startsWith('history') ? versions : 1); v++) {
      await call('PUT', 'DocumentReference/large', JSON.stringify(document('large', large, v % 2 ? 'superseded' : 'current')), admin, v ? 200 : 201);
    }
    /** An export of `type` kicked off, then the resources it selects changed after its transactionTime: their earlier versions exported. */
    const exportChanged = async (type: string, changed: () => Promise<unknown>) => {
      await kickOff(t, admin, `/$export?_type=${type}`);
      t.clock.advance(1000);
      await changed();
    };
    if (kind === 'export') {
      for (let i = 1; i < versions; i++) await call('PUT', `DocumentReference/large${i}`, JSON.stringify(document(`large${i}`, large)), admin, 201);
      await exportChanged('Patient', () => call('PUT', 'Patient/pa', { resourceType: 'Patient', id: 'pa', active: true }, admin, 200));
      await runExports(t);
      await exportChanged('DocumentReference', async () => {
        for (let i = 0; i < versions; i++) await call('PUT', `DocumentReference/large${i || ''}`, JSON.stringify(document(`large${i || ''}`, large, 'superseded')), admin, 200);
      });
    }
    if (kind !== 'export') {
      await call('PUT', 'DocumentReference/warm', document('warm', base64(3000)), admin, 201);
      await call('PUT', 'DocumentReference/warm', document('warm', base64(3003)), admin, 200);
    }
    const request = (target: string) =>
      kind === 'export' ? runExports(t).then(() => 0)
      : kind === 'audit' ? t.app.audit.flush().then(() => 0)
      : kind === 'integrity' ? call('POST', 'Observation', observation(target), patient, 201)
      : kind === 'read-patient' ? call('GET', `DocumentReference/${target}`, undefined, patient, 200)
      : kind === 'vread-patient' ? call('GET', `DocumentReference/${target}/_history/${target === 'warm' ? 2 : 1}`, undefined, patient, 200)
      : kind === 'meta' || kind === 'meta-patient' ? call('GET', `DocumentReference/${target}/$meta`, undefined, kind === 'meta' ? admin : patient, 200)
      : kind === 'delete-patient' ? call('DELETE', `DocumentReference/${target}`, undefined, patient, 204)
      : call('GET', `DocumentReference/${target}/_history`, undefined, kind === 'history' ? admin : patient, 200);
    if (kind === 'audit') {
      await t.app.audit.flush();
      await call('GET', 'DocumentReference/warm', undefined, admin, 200);
      await request('warm');
      await call('GET', 'DocumentReference/large', undefined, admin, 200);
    } else if (kind !== 'export') await request('warm');
    Bun.gc(true);
    await Bun.sleep(1000);
    const before = status('VmRSS');
    writeFileSync('/proc/self/clear_refs', '5');
    const started = performance.now();
    const bytes = await request('large');
    const ms = performance.now() - started;
    console.log(JSON.stringify({ peak: status('VmHWM') - before, ms, bytes }));
  } finally {
    await t.close();
    await db.drop();
  }
}

async function measure(kind: string, root: string, store: StoreKind): Promise<{ peak: number; ms: number }> {
  const proc = Bun.spawn(['bun', import.meta.path, '--child', kind, root, store, '--mib', String(mib), '--versions', String(versions)], { stdout: 'pipe', stderr: 'pipe' });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  const line = out.trim().split('\n').pop() ?? '';
  if (code !== 0 || !line.startsWith('{')) throw new Error(`${kind} ${root} ${store}: exit ${code}: ${err.slice(-2000)}`);
  return JSON.parse(line) as { peak: number; ms: number };
}

if (process.argv[2] === '--child') {
  await child(process.argv[3]!, process.argv[4]!, process.argv[5] as StoreKind);
} else {
  const roots = arg('--roots', resolve(import.meta.dir, '..')).split(',');
  const rounds = Number(arg('--rounds', '2'));
  const kinds = arg('--kinds', 'integrity,history-patient,history').split(',');
  console.log(`${mib} MiB per version, ${versions} versions for history, ${rounds} paired rounds; A = ${roots[0]}${roots[1] ? `, B = ${roots[1]}` : ''}\n`);
  console.log('| case | database | checkout | round | peak above before (MiB) | time (ms) |');
  console.log('|---|---|---|---:|---:|---:|');
  for (const store of storeKinds(arg('--store', 'both'))) {
    for (const kind of kinds) {
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 ? [...roots].reverse() : roots;
        for (const root of order) {
          const { peak, ms } = await measure(kind, root, store);
          console.log(`| ${kind} | ${store} | ${String.fromCharCode(65 + roots.indexOf(root))} | ${r + 1} | ${peak.toFixed(0)} | ${ms.toFixed(0)} |`);
        }
      }
    }
  }
}
