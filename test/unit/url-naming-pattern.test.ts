/**
 * urlNamingPattern (src/fhir/references.ts) matches exactly the URLs absoluteType gives its type, which
 * `patient:missing` relies on to count another server's URL as `patient=<url>` finds it: checked on URLs
 * made of every combination of the parts that decide it, as JavaScript's RegExp, SQLite's REGEXP (the
 * connection's function) and PostgreSQL's `~` (when reachable) read it.
 */
import { describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { absoluteType, urlNamingPattern } from '../../src/fhir/references.ts';
import { openDatabase } from '../../src/store/sqlite/db.ts';
import { PG_ADMIN_URL } from '../helpers/stores.ts';

const SCHEMES = ['http://', 'HTTPS://', 'urn:x://', 'x-y.z+1://', '1http://', 'http:/'];
const HOSTS = ['other.org', '', 'Patient', 'h\nost'];
const PREFIXES = ['', 'fhir/', 'a/b/', '/', 'Patient/', '#x/', 'urn:', 'urn:a/', 'http:', 'a?b/', 'a\nb/', 'Group/g1/'];
const TAILS = ['Patient/p1', 'Patient/p-1.2', 'Patient/_history', 'Patient/p1/_history/2', 'Patient/p1/_history/', 'Patient/p1/x', 'Patient/', 'Group/g1',
  'Patient/a b', `Patient/${'x'.repeat(64)}`, `Patient/${'x'.repeat(65)}`, 'Patient/p1?x', 'Patient/p1\n', 'Patient/p1/_history/2/_history/3', 'patient/p1', 'Patient/p1/_history/v\u2028'];

const URLS = SCHEMES.flatMap((scheme) => HOSTS.flatMap((host) => PREFIXES.flatMap((prefix) => TAILS.map((tail) => `${scheme}${host}/${prefix}${tail}`))));
const expected = (type: string) => URLS.map((url) => absoluteType(url) === type);

describe('urlNamingPattern', () => {
  test('matches exactly the URLs absoluteType reads as the type', () => {
    for (const type of ['Patient', 'Group']) {
      const re = new RegExp(urlNamingPattern(type));
      expect(URLS.map((url) => re.test(url))).toEqual(expected(type));
    }
    expect(expected('Patient').filter(Boolean).length).toBeGreaterThan(50);
  });

  test('SQLite REGEXP and PostgreSQL ~ read it alike', async () => {
    const db = openDatabase(':memory:');
    try {
      const q = db.query<{ m: number }, [string, string]>('SELECT ?1 REGEXP ?2 AS m');
      for (const type of ['Patient', 'Group']) expect(URLS.map((url) => q.get(url, urlNamingPattern(type))!.m === 1)).toEqual(expected(type));
    } finally {
      db.close();
    }
    const sql = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
    try {
      await sql`SELECT 1`;
    } catch {
      await sql.end();
      return;
    }
    try {
      for (const type of ['Patient', 'Group']) {
        const rows = await sql<{ m: boolean }[]>`SELECT u ~ ${urlNamingPattern(type)} AS m FROM unnest(${URLS}::text[]) WITH ORDINALITY AS x(u, n) ORDER BY n`;
        expect(rows.map((r) => r.m)).toEqual(expected(type));
      }
    } finally {
      await sql.end();
    }
  });
});
