/**
 * `cinder import` of FHIR XML files as a process (from source, and the built executable when there is
 * one), on both databases: HL7's XML examples land, a malformed XML file is named and writes nothing.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cinderCommands } from '../helpers/processes.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  for (const t of targets) await t.cleanup();
});

describe.each(cinderCommands())('cinder import of XML files (%s)', (_, command) => {
  for (const target of targets) {
    test(`into ${target.kind}: HL7 examples are imported, a malformed file is reported and writes nothing; exit code 1`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'cinder-import-xml-'));
      dirs.push(dir);
      const db = await target.migrated();
      const env = { PATH: process.env.PATH ?? '', HOME: dir, CINDER_DATA_DIR: join(dir, 'data'), CINDER_DATABASE_URL: db.url, CINDER_LOG_LEVEL: 'error' };
      const run = async (...args: string[]) => {
        const p = Bun.spawn([...command, ...args], { env, cwd: dir, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
        const [code, stdout, stderr] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
        return { code, stdout, stderr };
      };
      expect((await run('tenant', 'create', 't1')).code).toBe(0);
      const patient = join(dir, 'patient-example.xml');
      copyFileSync(new URL('../fixtures/r4-xml/patient-example.xml', import.meta.url), patient);
      const bundle = join(dir, 'bundle.xml');
      // A transaction whose second entry's resource is cut short: not XML, so not one entry of it is written.
      writeFileSync(bundle, '<Bundle xmlns="http://hl7.org/fhir"><type value="transaction"/>' +
        '<entry><resource><Patient><id value="e2e-1"/></Patient></resource><request><method value="PUT"/><url value="Patient/e2e-1"/></request></entry>' +
        '<entry><resource><Patient><id value="e2e-2"/></resource></entry></Bundle>');
      const r = await run('import', '--tenant', 't1', patient, bundle);
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(/^Imported 1 resources into tenant 't1' .*; 1 failed\.\n$/);
      expect(r.stderr).toMatch(new RegExp(`^${bundle}: malformed XML: End tag '</resource>' does not match '<Patient>' \\(line 1, column \\d+\\)$`, 'm'));
      const store = db.open();
      expect(JSON.parse((await store.resources.read('t1', 'Patient', 'example'))!.content)).toMatchObject({ resourceType: 'Patient', id: 'example', name: [{ family: 'Chalmers' }, expect.anything(), expect.anything()] });
      expect(await store.resources.read('t1', 'Patient', 'e2e-1')).toBeNull();
    });
  }
});
