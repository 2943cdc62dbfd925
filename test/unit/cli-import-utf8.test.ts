/**
 * `cinder import` of files that are not UTF-8, on both stores: an NDJSON line holding a Latin-1 byte is a failed
 * line naming the byte's offset in the line and in the file and the element it falls in, the lines around it are
 * imported (in a file read in many chunks too, and gzipped); a JSON document holding one is a failed file, nothing
 * of it stored; an XML collection stops at it, the entries read before it kept. Nothing is stored with U+FFFD.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { createCliEnv } from '../helpers/cli.ts';
import { storeTargets, type StoreTarget } from '../helpers/stores.ts';
import type { Store } from '../../src/store/types.ts';

type Json = Record<string, any>;

const targets = await storeTargets({ main: false });
afterAll(async () => {
  for (const t of targets) await t.cleanup();
});

const latin1 = (text: string) => Buffer.from(text, 'latin1');
const utf8 = (text: string) => Buffer.from(text, 'utf8');
const patient = (id: string, family: string) => `{"resourceType":"Patient","id":"${id}","name":[{"family":"${family}"}]}`;

for (const target of targets) {
  describe(`cinder import of text that is not UTF-8 (${target.kind})`, () => {
    let cli: ReturnType<typeof createCliEnv>;
    let db: Awaited<ReturnType<StoreTarget['migrated']>>;
    let store: Store;
    const family = async (id: string) => {
      const row = await store.resources.read('t1', 'Patient', id);
      return row ? (JSON.parse(row.content) as Json).name[0].family : undefined;
    };
    const file = (name: string, bytes: Uint8Array) => {
      const path = join(cli.dir, name);
      writeFileSync(path, bytes);
      return path;
    };

    beforeAll(async () => {
      db = await target.migrated();
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
      store = db.open();
    });
    afterAll(async () => {
      await store.close();
      cli.close();
    });

    test('an NDJSON line with a Latin-1 byte fails alone, named by line, offsets and element; the lines around it are imported', async () => {
      const lines = [utf8(patient('n1', 'M\u00fcller')), latin1(patient('n2', 'M\xfcller')), utf8(patient('n3', 'Stra\u00dfe \u20ac\ud83d\ude00'))];
      const bytes = Buffer.concat([new Uint8Array([0xef, 0xbb, 0xbf]), lines[0]!, utf8('\r\n'), lines[1]!, utf8('\n'), lines[2]!, utf8('\n')]);
      const inLine = lines[1]!.indexOf(0xfc);
      const inFile = bytes.indexOf(0xfc);
      for (const [name, content] of [['latin1.ndjson', bytes], ['latin1.ndjson.gz', gzipSync(bytes)]] as const) {
        const path = file(name, new Uint8Array(content));
        const r = await cli.run(['import', '--tenant', 't1', path]);
        expect(r.stderr).toBe(`${path}:2: the line is not valid UTF-8: byte 0xFC at byte offset ${inLine} (counting from 0) of the line, byte offset ${inFile} of the input, in Patient.name[0].family: not read\n`);
        expect(r.code).toBe(1);
        expect(r.stdout).toMatch(/^Imported 2 resources .*; (2 unchanged, )?1 failed\.\n$/);
      }
      expect(await family('n1')).toBe('M\u00fcller');
      expect(await family('n2')).toBeUndefined();
      expect(await family('n3')).toBe('Stra\u00dfe \u20ac\ud83d\ude00');
      const json = await cli.run(['import', '--tenant', 't1', '--json', file('latin1.ndjson', new Uint8Array(bytes))]);
      const [issue] = JSON.parse(json.stdout).errors;
      expect(issue).toMatchObject({ line: 2, issues: [{ code: 'structure', expression: ['Patient.name[0].family'] }] });
    });

    test('a file read in many chunks: bad lines anywhere (one cut short at the end of the file) fail, every other line is imported', async () => {
      const parts: Uint8Array[] = [];
      const bad = new Set([7, 500, 1501]);
      for (let i = 1; i <= 1501; i++) {
        const name = `\u00e9\u20ac\ud83d\ude00${'x'.repeat(i % 97)}`;
        parts.push(bad.has(i) && i !== 1501 ? latin1(patient(`c${i}`, `K\xf6ln${'x'.repeat(i % 97)}`)) : utf8(patient(`c${i}`, name)));
        parts.push(utf8('\n'));
      }
      // The last line ends with a character cut short (no line break after it).
      parts.push(utf8(patient('c1502', 'end')), new Uint8Array([0xe2, 0x82]));
      const r = await cli.run(['import', '--tenant', 't1', file('chunks.ndjson', new Uint8Array(Buffer.concat(parts)))]);
      expect(r.code).toBe(1);
      const failed = r.stderr.trim().split('\n').map((l) => l.replace(/^.*\.ndjson:(\d+): .*$/, '$1'));
      expect(failed).toEqual(['7', '500', '1502']);
      expect(r.stderr).toContain('1502: the line is not valid UTF-8: bytes 0xE2 0x82 at byte offset');
      expect(r.stdout).toMatch(/^Imported 1,499 resources .*; 3 failed\.\n$/);
      expect(await family('c8')).toBe(`\u00e9\u20ac\ud83d\ude00${'x'.repeat(8)}`);
      expect(await family('c1501')).toBe(`\u00e9\u20ac\ud83d\ude00${'x'.repeat(1501 % 97)}`);
      expect(await family('c500')).toBeUndefined();
    });

    test('a JSON document with a Latin-1 byte fails whole, named by offset, line and element; nothing of it is stored', async () => {
      const text = JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: [
        { resource: { resourceType: 'Patient', id: 'd1', active: true } },
        { resource: { resourceType: 'Patient', id: 'd2', name: [{ family: 'M\xfcller' }] } },
      ] }, null, 1);
      const bytes = latin1(text);
      const line = text.slice(0, text.indexOf('\xfc')).split('\n').length;
      const path = file('bundle.json', new Uint8Array(bytes));
      const r = await cli.run(['import', '--tenant', 't1', path]);
      expect(r.stderr).toBe(`${path}: the file is not valid UTF-8: byte 0xFC at byte offset ${bytes.indexOf(0xfc)} (counting from 0), on line ${line}, in Bundle.entry[1].resource.name[0].family: not read\n`);
      expect(r.code).toBe(1);
      expect(await family('d1')).toBeUndefined();
      expect(await family('d2')).toBeUndefined();
    });

    test('an XML collection stops at a Latin-1 byte: the entries read before it are imported, the file is reported with offset and line', async () => {
      const entry = (id: string, name: string) => `<entry><resource><Patient><id value="${id}"/><name><family value="${name}"/></name></Patient></resource></entry>\n`;
      const head = `<Bundle xmlns="http://hl7.org/fhir">\n<type value="collection"/>\n${entry('x1', 'K\u00f6ln')}`;
      const bytes = Buffer.concat([utf8(head), latin1(entry('x2', 'M\xfcller')), utf8(`${entry('x3', 'ok')}</Bundle>\n`)]);
      const path = file('bundle.xml', new Uint8Array(bytes));
      const r = await cli.run(['import', '--tenant', 't1', path]);
      expect(r.stderr).toBe(`${path}: the file is not valid UTF-8: byte 0xFC at byte offset ${bytes.indexOf(0xfc)} (counting from 0), on line 4: not read\n`);
      expect(r.code).toBe(1);
      expect(await family('x1')).toBe('K\u00f6ln');
      expect(await family('x2')).toBeUndefined();
    });

    // FHIR XML is UTF-8 (R4 xml.html), as the REST API reads it: a declaration naming another encoding is refused
    // naming it, whether the text holds only ASCII or Latin-1 bytes; nothing of the file is stored, read either way.
    test('an XML file declaring encoding="ISO-8859-1" is refused naming the declaration, ASCII or not; nothing of it is stored', async () => {
      const entry = (id: string, name: string) => `<entry><resource><Patient><id value="${id}"/><name><family value="${name}"/></name></Patient></resource></entry>\n`;
      const files = [
        ['iso-ascii.xml', latin1(`<?xml version="1.0" encoding="ISO-8859-1"?>\n<Bundle xmlns="http://hl7.org/fhir">\n<type value="collection"/>\n${entry('i1', 'Koeln')}</Bundle>\n`)],
        ['iso-latin1.xml', latin1(`<?xml version="1.0" encoding="ISO-8859-1"?>\n<Patient xmlns="http://hl7.org/fhir"><id value="i2"/><name><family value="M\xfcller"/></name></Patient>\n`)],
        ['iso-single-quotes.xml', latin1(`<?xml version='1.0' encoding='iso-8859-1'?><Bundle xmlns="http://hl7.org/fhir"><type value="collection"/>${entry('i3', 'M\xfcller')}</Bundle>`)],
      ] as const;
      for (const [name, bytes] of files) {
        const path = file(name, new Uint8Array(bytes));
        const r = await cli.run(['import', '--tenant', 't1', path]);
        const declared = name === 'iso-single-quotes.xml' ? 'iso-8859-1' : 'ISO-8859-1';
        expect(r.stderr).toBe(`${path}: The resource declares encoding '${declared}' (line 1, column 1): FHIR XML is read in UTF-8 only (R4 http.html: UTF-8 SHALL be used)\n`);
        expect(r.code).toBe(1);
      }
      for (const id of ['i1', 'i2', 'i3']) expect(await family(id)).toBeUndefined();
    });
  });
}
