/**
 * `cinder import` of FHIR XML files (a resource, transaction, batch and collection Bundles), alone and
 * beside JSON and NDJSON, on both adapters; built from HL7's own R4 XML examples (test/fixtures/r4-xml).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringifyExact } from '../../src/fhir/exact-json.ts';
import { parseFhirXml } from '../../src/fhir/xml/from-xml.ts';
import type { Store } from '../../src/store/types.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { storeTargets, type StoreTarget } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const FHIR = 'xmlns="http://hl7.org/fhir"';
type Json = Record<string, unknown>;

/** An HL7 example's XML, without its XML declaration (so that it can be an entry's resource). */
const example = (name: string) => readFileSync(new URL(`../fixtures/r4-xml/${name}`, import.meta.url), 'utf8').replace(/^<\?xml[^>]*\?>/, '');
/** What the example is as JSON, without `meta` (the import stamps its own). */
const contentOf = (xml: string) => withoutMeta(JSON.parse(stringifyExact(parseFhirXml(xml))) as Json);
function withoutMeta(resource: Json): Json {
  const { meta: _, ...rest } = resource;
  return rest;
}

function entry(resource: string, method: string, url: string, fullUrl?: string): string {
  return `<entry>${fullUrl ? `<fullUrl value="${fullUrl}"/>` : ''}<resource>${resource}</resource><request><method value="${method}"/><url value="${url}"/></request></entry>`;
}
const bundle = (type: string, entries: string[]) => `<?xml version="1.0" encoding="UTF-8"?>\n<Bundle ${FHIR}>\n<type value="${type}"/>\n${entries.join('\n')}\n</Bundle>\n`;
const patient = (id: string, extra = '') => `<Patient ${FHIR}><id value="${id}"/>${extra}</Patient>`;
const observation = (id: string, subject: string) =>
  `<Observation ${FHIR}><id value="${id}"/><status value="final"/><code><text value="x"/></code><subject><reference value="${subject}"/></subject></Observation>`;

afterAll(async () => {
  for (const t of targets) await t.cleanup();
});

for (const target of targets) {
  describe(`cinder import of FHIR XML into ${target.kind}`, () => {
    let cli: ReturnType<typeof createCliEnv>;
    let db: Awaited<ReturnType<StoreTarget['fresh']>>;
    let store: Store;
    const file = (name: string, text: string) => {
      const path = join(cli.dir, name);
      writeFileSync(path, text);
      return path;
    };
    const read = async (type: string, id: string) => {
      const v = await store.resources.read('t1', type, id);
      return v && !v.deleted ? (JSON.parse(v.content) as Json) : undefined;
    };

    beforeAll(async () => {
      db = await target.migrated();
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
      store = db.open();
    });

    afterAll(() => cli.close());

    test("an XML transaction Bundle of HL7's examples is processed as if POSTed, and a single XML resource stored as its JSON is", async () => {
      const [pat, bmd, practitioner] = ['patient-example.xml', 'observation-example-bmd.xml', 'practitioner-example-xcda-author.xml'].map(example);
      const tx = file('transaction.xml', bundle('transaction', [
        entry(pat!, 'PUT', 'Patient/example'),
        entry(bmd!, 'PUT', 'Observation/bmd'),
        // A created Patient, and an Observation referring to it by its fullUrl.
        entry(patient('ignored', '<gender value="female"/>'), 'POST', 'Patient', 'urn:uuid:1f0c4a52-8d6e-4b43-9a8e-0b7f2c6d1e01'),
        entry(observation('tx-obs', 'urn:uuid:1f0c4a52-8d6e-4b43-9a8e-0b7f2c6d1e01'), 'PUT', 'Observation/tx-obs'),
      ]));
      const single = file('practitioner.xml', practitioner!);
      const r = await cli.run(['import', '--tenant', 't1', '--json', tx, single]);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(r.stdout)).toMatchObject({ files: 2, imported: 5, failed: 0, errors: [] });

      expect(withoutMeta((await read('Patient', 'example'))!)).toEqual(contentOf(pat!));
      expect(withoutMeta((await read('Observation', 'bmd'))!)).toEqual(contentOf(bmd!));
      expect(withoutMeta((await read('Practitioner', 'xcda-author'))!)).toEqual(contentOf(practitioner!));
      // POST: a server id (the one given ignored), and the reference rewritten to it, as a transaction does.
      expect(await read('Patient', 'ignored')).toBeUndefined();
      const subject = ((await read('Observation', 'tx-obs'))!.subject as { reference: string }).reference;
      expect(subject).toMatch(/^Patient\/[0-9a-f-]{36}$/);
      expect(await read('Patient', subject.slice('Patient/'.length))).toMatchObject({ gender: 'female' });
      // History names what each entry did.
      expect((await store.resources.history('t1', { type: 'Patient', id: subject.slice(8), count: 5 })).map((v) => v.method)).toEqual(['POST']);
    });

    test("a List's own entries are its content: imported with it (List.entry is no Bundle's entry)", async () => {
      const items = Array.from({ length: 3 }, (_, i) => `<entry><flag><text value="f${i}"/></flag><item><reference value="Patient/p${i}"/></item></entry>`).join('');
      const list = file('list.xml', `<List ${FHIR}><id value="xml-list"/><status value="current"/><mode value="working"/>${items}</List>`);
      const r = await cli.run(['import', '--tenant', 't1', '--json', list]);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      const stored = (await read('List', 'xml-list'))!;
      expect(stored.entry).toEqual([0, 1, 2].map((i) => ({ flag: { text: `f${i}` }, item: { reference: `Patient/p${i}` } })));
    });

    test('an XML collection Bundle is unpacked; an XML batch keeps its good entries', async () => {
      const [org, enc] = ['organization-example-hl7pay.xml', 'encounter-example.xml'].map(example);
      const collection = file('collection.xml', bundle('collection', [
        `<entry><resource>${org}</resource></entry>`,
        `<entry><resource>${enc}</resource></entry>`,
      ]));
      const batch = file('batch.xml', bundle('batch', [
        entry(patient('batch-ok'), 'PUT', 'Patient/batch-ok'),
        entry(patient('batch-bad', '<gender value="woman"/>'), 'PUT', 'Patient/batch-bad'),
      ]));
      const r = await cli.run(['import', '--tenant', 't1', '--json', collection, batch]);
      expect(r.code).toBe(1);
      const summary = JSON.parse(r.stdout);
      expect(summary).toMatchObject({ imported: 3, failed: 1 });
      expect(summary.errors).toEqual([expect.objectContaining({ file: batch, entry: 1, message: expect.stringMatching(/^Bundle\.entry\[1\]: 422: /) })]);
      expect(summary.errors[0].issues.map((i: { expression?: string[] }) => i.expression?.[0])).toContain('Bundle.entry[1].resource.gender');
      expect(withoutMeta((await read('Organization', 'hl7pay'))!)).toEqual(contentOf(org!));
      expect(withoutMeta((await read('Encounter', 'example'))!)).toEqual(contentOf(enc!));
      expect(await read('Patient', 'batch-ok')).toBeDefined();
      expect(await read('Patient', 'batch-bad')).toBeUndefined();
    });

    test('an XML collection Bundle is imported as it is read: an entry that is not FHIR XML is skipped with its index, a later fullUrl resolves, a file cut short keeps what came before', async () => {
      const uuid = (prefix: string, k: number) => `urn:uuid:00000000-0000-4000-8000-${prefix === 'sc' ? '1' : '2'}${String(k).padStart(11, '0')}`;
      // About 1.3 MB: many chunks of the file, narratives and CR LF line ends cut across them.
      const narrated = (id: string) => patient(id, `<text><status value="generated"/><div xmlns="http://www.w3.org/1999/xhtml">\n<p>${`Patient ${id} &amp; <b>kin</b>; `.repeat(120)}</p>\n</div></text>`);
      const entries = (prefix: string) => Array.from({ length: 300 }, (_, k) => {
        const resource =
          k === 1 ? observation(`${prefix}-obs`, uuid(prefix, 299)) :
          k === 5 ? patient(`${prefix}-${k}`, '<nickname value="Jim"/>') :
          k === 7 ? patient(`${prefix}-${k}`, '<gender value="woman"/>') :
          narrated(`${prefix}-${k}`);
        return `<entry><fullUrl value="${uuid(prefix, k)}"/><resource>${resource}</resource></entry>`;
      });
      const whole = file('stream-collection.xml', bundle('collection', entries('sc')).replaceAll('\n', '\r\n'));
      const r = await cli.run(['import', '--tenant', 't1', '--json', whole]);
      expect(r.code).toBe(1);
      const summary = JSON.parse(r.stdout);
      expect(summary).toMatchObject({ imported: 298, failed: 2 });
      expect(summary.errors).toEqual([
        expect.objectContaining({ file: whole, entry: 5, message: "Bundle.entry[5].resource.nickname: Unknown element 'nickname' in Bundle.entry[5].resource (an element of Patient)" }),
        expect.objectContaining({ file: whole, entry: 7, message: expect.stringContaining('Bundle.entry[7].resource.gender') }),
      ]);
      expect(summary.errors[0].issues[0].expression).toEqual(['Bundle.entry[5].resource.nickname']);
      // The narrative as written (CR LF read as LF), and the Observation's reference to the last entry rewritten.
      expect(withoutMeta((await read('Patient', 'sc-250'))!)).toEqual(contentOf(narrated('sc-250')));
      expect((await read('Observation', 'sc-obs'))!.subject).toEqual({ reference: 'Patient/sc-299' });
      expect(await read('Patient', 'sc-5')).toBeUndefined();

      // Cut inside entry 150: the 150 entries before it are imported (but the two bad ones, and the Observation, whose target is cut off).
      const text = bundle('collection', entries('cut'));
      const cut = file('cut-collection.xml', text.slice(0, text.indexOf(uuid('cut', 150)) + 20));
      const c = await cli.run(['import', '--tenant', 't1', '--json', cut]);
      expect(c.code).toBe(1);
      const cutSummary = JSON.parse(c.stdout);
      expect(cutSummary).toMatchObject({ imported: 147, failed: 4 });
      expect(cutSummary.errors.map((e: { message: string }) => e.message)).toEqual([
        expect.stringMatching(/^Bundle\.entry\[5\]\.resource\.nickname: /),
        expect.stringContaining('Bundle.entry[7].resource.gender'),
        expect.stringMatching(/^malformed XML: .+ \(line \d+, column \d+\)$/),
        expect.stringMatching(/^Bundle\.entry\[1\]: reference 'urn:uuid:[0-9a-f-]+' /),
      ]);
      expect(await read('Patient', 'cut-149')).toBeDefined();
      expect(await read('Patient', 'cut-150')).toBeUndefined();
    });

    test('entries of an XML collection Bundle that refer to each other by fullUrl are imported, as the same Bundle in JSON is', async () => {
      // An Encounter and its diagnosis refer to each other (Encounter.diagnosis.condition, Condition.encounter); neither has an id.
      const encounter = `<Encounter ${FHIR}><status value="finished"/><class><code value="AMB"/></class><diagnosis><condition><reference value="urn:uuid:0c0d0000-0000-4000-8000-000000000002"/></condition></diagnosis></Encounter>`;
      const condition = `<Condition ${FHIR}><code><text value="cycle"/></code><subject><reference value="Patient/cy-p"/></subject><encounter><reference value="urn:uuid:0c0d0000-0000-4000-8000-000000000001"/></encounter></Condition>`;
      const text = bundle('collection', [
        `<entry><fullUrl value="urn:uuid:0c0d0000-0000-4000-8000-000000000000"/><resource>${patient('cy-p')}</resource></entry>`,
        `<entry><fullUrl value="urn:uuid:0c0d0000-0000-4000-8000-000000000001"/><resource>${encounter}</resource></entry>`,
        `<entry><fullUrl value="urn:uuid:0c0d0000-0000-4000-8000-000000000002"/><resource>${condition}</resource></entry>`,
      ]);
      const json = file('cycle.json', JSON.stringify(parseFhirXml(text)));
      const xml = file('cycle.xml', text);
      for (const path of [json, xml]) {
        const r = await cli.run(['import', '--tenant', 't1', '--json', path]);
        expect({ path, code: r.code, summary: JSON.parse(r.stdout) }).toMatchObject({ path, code: 0, summary: { imported: 3, failed: 0 } });
      }
    });

    test('malformed XML, XML that is not FHIR, and an invalid transaction entry: named with file and element, nothing of them written', async () => {
      const unclosed = file('unclosed.xml', bundle('transaction', [entry(patient('mx-1'), 'PUT', 'Patient/mx-1'), entry(patient('mx-2'), 'PUT', 'Patient/mx-2')]).replace('</Bundle>', ''));
      const unknown = file('unknown.xml', bundle('transaction', [
        entry(patient('mx-3'), 'PUT', 'Patient/mx-3'),
        entry(patient('mx-4', '<nickname value="Jim"/>'), 'PUT', 'Patient/mx-4'),
      ]));
      const invalid = file('invalid.xml', bundle('transaction', [
        entry(patient('mx-5'), 'PUT', 'Patient/mx-5'),
        entry(patient('mx-6', '<gender value="woman"/>'), 'PUT', 'Patient/mx-6'),
      ]));
      const notFhir = file('not-fhir.xml', '<Patient xmlns="urn:other"><id value="mx-7"/></Patient>');
      const good = file('good.json', JSON.stringify({ resourceType: 'Patient', id: 'mx-ok' }));
      const r = await cli.run(['import', '--tenant', 't1', unclosed, unknown, invalid, notFhir, good]);
      expect(r.code).toBe(1);
      const lines = r.stderr.split('\n');
      expect(lines.find((l) => l.startsWith(`${unclosed}:`))).toMatch(new RegExp(`^${unclosed}: malformed XML: .+ \\(line \\d+, column \\d+\\)$`));
      expect(lines).toContain(`${unknown}: Bundle.entry[1].resource.nickname: Unknown element 'nickname' in Bundle.entry[1].resource (an element of Patient)`);
      expect(lines.find((l) => l.startsWith(`${invalid}:`))).toBe(
        `${invalid}: transaction Bundle rolled back: The transaction (nothing was written) is not valid: Bundle.entry[1].resource.gender: "woman" is not in the required value set http://hl7.org/fhir/ValueSet/administrative-gender (female, male, other, unknown)`,
      );
      expect(lines.find((l) => l.startsWith(`${notFhir}:`))).toBe(`${notFhir}: Patient: Element 'Patient' is not in the FHIR namespace (http://hl7.org/fhir; it is in 'urn:other')`);
      // An unreadable file counts one failure (as a malformed JSON file does); a rolled-back transaction each of its writes.
      expect(r.stdout).toMatch(/Imported 1 resources .*; 5 failed\.\n$/);
      for (const id of ['mx-1', 'mx-2', 'mx-3', 'mx-4', 'mx-5', 'mx-6', 'mx-7']) expect(await read('Patient', id)).toBeUndefined();
      expect(await read('Patient', 'mx-ok')).toBeDefined();

      // --json names the element in the issue's expression too.
      const json = JSON.parse((await cli.run(['import', '--tenant', 't1', '--json', unknown])).stdout);
      expect(json.errors).toEqual([expect.objectContaining({ file: unknown, issues: [expect.objectContaining({ code: 'structure', expression: ['Bundle.entry[1].resource.nickname'] })] })]);
    });

    test('XML, JSON and NDJSON files in one run: urn references resolve across them whatever the order; XML told by its first character', async () => {
      const shared = 'urn:uuid:6a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d';
      // The XML transaction comes first and refers to an entry of the JSON batch that follows: deferred, then re-read.
      const tx = file('refers.xml', bundle('transaction', [entry(observation('mix-obs', shared), 'PUT', 'Observation/mix-obs')]));
      const batch = file('target.json', JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry: [
        { fullUrl: shared, resource: { resourceType: 'Patient', id: 'mix-pat' }, request: { method: 'PUT', url: 'Patient/mix-pat' } },
      ] }));
      const lines = file('lines.ndjson', [{ resourceType: 'Patient', id: 'mix-line' }].map((l) => JSON.stringify(l)).join('\n') + '\n');
      // No extension: a BOM, whitespace, then `<`.
      const bare = file('exported-resource', `\uFEFF\n  ${patient('mix-bare', '<active value="true"/>')}`);
      const r = await cli.run(['import', '--tenant', 't1', '--json', tx, batch, lines, bare]);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(r.stdout)).toMatchObject({ files: 4, imported: 4, failed: 0 });
      expect((await read('Observation', 'mix-obs'))!.subject).toEqual({ reference: 'Patient/mix-pat' });
      expect(await read('Patient', 'mix-line')).toBeDefined();
      expect(await read('Patient', 'mix-bare')).toMatchObject({ active: true });

      // Again: nothing changed, nothing written.
      const again = await cli.run(['import', '--tenant', 't1', '--json', tx, batch, lines, bare]);
      expect(JSON.parse(again.stdout)).toMatchObject({ imported: 4, unchanged: 4, failed: 0 });
    });
  });
}
