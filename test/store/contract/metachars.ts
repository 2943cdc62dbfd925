import { describe, expect, test } from 'bun:test';
import type { Store } from '../../../src/store/types.ts';
import { ids, save, tokens, uniqueTenant } from './fixtures.ts';

/** Strings that break naive SQL, LIKE patterns, array literals or encodings (Postgres text cannot hold NUL). */
export const NASTY = [
  "O'Brien",
  "x'); DROP TABLE resources;--",
  '100%',
  'a_b',
  'back\\slash',
  '"double"',
  '{brace,comma}',
  'NULL',
  'Zoë 東京 🚀',
  'tab\tnew\nline',
  ' spaced ',
  '$1 ? :name',
  '',
];
/** Near misses that a wildcard, escape or case-folding bug would match. */
const DECOYS = ["o'brien", '1000', 'axb', 'backslash', 'back\\\\slash', 'double', 'null', 'Zoe 東京 🚀', 'spaced', '%', '_'];

/** SQL metacharacters in every stored value round-trip and match exactly. */
export function metacharContract(store: () => Store) {
  describe('SQL metacharacters', () => {
    test('in ids, index values, systems, compartments and content: round-trip and exact match', async () => {
      const s = store();
      const t = uniqueTenant("q'%_;--");
      const all = [...NASTY, ...DECOYS];
      for (const [i, text] of all.entries()) {
        await save(s, t, 'Patient', `id-${text}`, {
          lastUpdated: i,
          index: [{ param: 'identifier', system: `sys-${text}`, value: text }],
          compartments: [`pat-${text}`],
          body: { note: text },
        });
      }
      for (const text of NASTY) {
        const id = `id-${text}`;
        const read = await s.resources.read(t, 'Patient', id);
        expect(JSON.parse(read!.content).note).toBe(text);
        const bySystem = await s.resources.search(t, {
          type: 'Patient', sort: [], count: 100, where: tokens([{ param: 'identifier', values: [{ system: `sys-${text}`, value: text }] }]),
        });
        expect(ids(bySystem)).toEqual([id]);
        const byValue = await s.resources.search(t, { type: 'Patient', sort: [], count: 100, where: tokens([{ param: 'identifier', values: [{ value: text }] }]) });
        expect(ids(byValue)).toEqual([id]);
        expect(ids(await s.resources.search(t, { type: 'Patient', sort: [], count: 100, compartment: `pat-${text}` }))).toEqual([id]);
        expect(ids(await s.resources.search(t, { type: 'Patient', sort: [], count: 100, where: [{ kind: 'id', ids: [id] }] }))).toEqual([id]);
      }
      expect(await s.resources.count(t, { type: 'Patient', sort: [], count: 1 })).toBe(all.length);
      expect((await s.resources.history(t, { type: 'Patient', id: `id-${NASTY[1]}`, count: 5 })).length).toBe(1);
    });

    test('in tenant ids and client fields', async () => {
      const s = store();
      for (const text of NASTY.filter((x) => x !== '')) {
        const id = `${uniqueTenant()}${text}`;
        await s.tenants.create(id, 1);
        expect(await s.tenants.get(id)).toEqual({ id, createdAt: 1 });
        const c = {
          tenant: id, clientId: `c-${id}`, name: text, secretHash: null, grants: [text], scopes: [text], redirectUris: [text],
          jwks: null, jwksUrl: text, readAttributes: [text], accessTokenTtl: null, createdAt: 1, disabled: false, previousSecretHash: null, previousSecretUntil: null, deletedAt: null, tokensRevokedAt: null,
        };
        await s.clients.create(c);
        expect(await s.clients.get(c.clientId)).toEqual({ ...c, revocationSeq: 0 });
      }
    });
  });
}
