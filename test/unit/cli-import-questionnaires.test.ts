/**
 * `cinder import` checks each QuestionnaireResponse against its Questionnaire as a REST write at
 * `strict` does (the tenant's Questionnaires as stored when the import starts: NDJSON lines on the
 * preparation thread, JSON documents on the importing one), and `cinder validate` checks stored ones;
 * on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCliEnv } from '../helpers/cli.ts';
import { storeTargets, type StoreTarget } from '../helpers/stores.ts';

type Json = Record<string, unknown>;

const targets = await storeTargets({ main: false });
afterAll(async () => {
  for (const t of targets) await t.cleanup();
});

const URL = 'http://example.org/Questionnaire/weight';
const questionnaire: Json = { resourceType: 'Questionnaire', id: 'weight', url: URL, status: 'active', item: [{ linkId: 'kg', type: 'decimal', required: true }] };
const response = (id: string, answer: Json): Json => ({ resourceType: 'QuestionnaireResponse', id, questionnaire: URL, status: 'completed', item: [{ linkId: 'kg', answer: [answer] }] });

for (const target of targets) {
  describe(`QuestionnaireResponses in cinder import and validate (${target.kind})`, () => {
    let cli: ReturnType<typeof createCliEnv>;
    let db: Awaited<ReturnType<StoreTarget['fresh']>>;
    const file = (name: string, lines: unknown[]) => {
      const path = join(cli.dir, name);
      writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
      return path;
    };
    const read = async (id: string) => (await db.open().resources.read('t1', 'QuestionnaireResponse', id)) !== null;

    beforeAll(async () => {
      db = await target.migrated();
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
    });
    afterAll(() => cli.close());

    test('a Questionnaire imported in a run applies from the next run on; lines and document entries are checked', async () => {
      const first = await cli.run(['import', '--tenant', 't1', '--json', file('first.ndjson', [questionnaire, response('early', { valueString: 'x' })])]);
      expect(JSON.parse(first.stdout)).toMatchObject({ imported: 2, failed: 0 });
      const collection = join(cli.dir, 'collection.json');
      writeFileSync(collection, JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [{ resource: response('t-bad', { valueString: 'x' }), request: { method: 'PUT', url: 'QuestionnaireResponse/t-bad' } }] }));
      const r = await cli.run(['import', '--tenant', 't1', '--json', file('lines.ndjson', [response('ok', { valueDecimal: 70 }), response('bad', { valueString: 'heavy' })]), collection]);
      expect(r.code).toBe(1);
      const summary = JSON.parse(r.stdout);
      expect(summary).toMatchObject({ imported: 1, failed: 2 });
      expect(summary.errors[0]).toMatchObject({ line: 2, issues: [{ expression: ['QuestionnaireResponse.item[0].answer[0]'] }] });
      expect(summary.errors[0].issues[0].details.text).toContain("'kg'");
      expect(summary.errors[1].file).toBe(collection);
      expect(await read('ok')).toBe(true);
      expect(await read('bad')).toBe(false);
      expect(await read('t-bad')).toBe(false);
    });

    test('cinder validate finds a stored response that breaks its Questionnaire', async () => {
      const v = await cli.run(['validate', '--tenant', 't1', '--type', 'QuestionnaireResponse']);
      expect(v.code).toBe(1);
      const outcomes = v.stdout.trim().split('\n').map((l) => JSON.parse(l) as { issue: { diagnostics: string; expression: string[] }[] });
      expect(outcomes.flatMap((o) => o.issue.map((i) => `${i.diagnostics.split(':')[0]} ${i.expression[0]}`))).toEqual(['QuestionnaireResponse/early QuestionnaireResponse.item[0].answer[0]']);
    });

    test('the item constraints of extensions (maxValue) hold in import and validate', async () => {
      const url = 'http://example.org/Questionnaire/bounded';
      const bounded = (extension: Json[]): Json => ({ resourceType: 'Questionnaire', id: 'bounded', url, status: 'active', item: [{ linkId: 'kg', type: 'decimal', ...(extension.length > 0 ? { extension } : {}) }] });
      const answer = (id: string, kg: number): Json => ({ ...response(id, { valueDecimal: kg }), questionnaire: url });
      const maxValue = { url: 'http://hl7.org/fhir/StructureDefinition/maxValue', valueDecimal: 300 };
      const first = await cli.run(['import', '--tenant', 't1', '--json', file('bounded-1.ndjson', [bounded([]), answer('heavy-before', 500)])]);
      expect(first.code, first.stdout + first.stderr).toBe(0);
      expect((await cli.run(['import', '--tenant', 't1', '--json', file('bounded-2.ndjson', [bounded([maxValue])])])).code).toBe(0);
      const r = await cli.run(['import', '--tenant', 't1', '--json', file('bounded-3.ndjson', [answer('light', 70), answer('heavy', 500)])]);
      expect(r.code).toBe(1);
      const summary = JSON.parse(r.stdout);
      expect(summary).toMatchObject({ imported: 1, failed: 1, errors: [{ line: 2, issues: [{ expression: ['QuestionnaireResponse.item[0].answer[0]'] }] }] });
      expect(summary.errors[0].issues[0].details.text).toContain('more than its maxValue of 300');
      const v = await cli.run(['validate', '--tenant', 't1', '--type', 'QuestionnaireResponse']);
      const outcomes = v.stdout.trim().split('\n').map((l) => JSON.parse(l) as { issue: { diagnostics: string; expression: string[] }[] });
      const found = outcomes.flatMap((o) => o.issue).filter((i) => i.diagnostics.startsWith('QuestionnaireResponse/heavy-before'));
      expect(found.map((i) => i.expression[0])).toEqual(['QuestionnaireResponse.item[0].answer[0]']);
      expect(found[0]!.diagnostics).toContain('maxValue');
    });
  });
}
