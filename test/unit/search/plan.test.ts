/** The search planner: which indexed condition drives a search, and how much counting it costs to choose. */
import { describe, expect, test } from 'bun:test';
import { compileSearch } from '../../../src/fhir/search.ts';
import { DRIVER_MAX_ROWS, DRIVER_TAKE_AT, driverCandidates, planSearch, SQLITE, type DriverCandidate } from '../../../src/store/search-sql.ts';

/** Candidates whose statements are just their names, and a count that answers each one's rows up to the limit asked. */
function counting(rows: Record<string, number>) {
  const asked: [string, number][] = [];
  const candidates: DriverCandidate[] = Object.keys(rows).map((name, i) => ({ driver: name === 'compartment' ? 'compartment' : i, count: (limit) => ({ sql: `${name} ${limit}`, values: [] }) }));
  const count = (sql: string) => {
    const [name, limit] = sql.split(' ') as [string, string];
    asked.push([name, Number(limit)]);
    return Math.min(rows[name]!, Number(limit));
  };
  return { candidates, count, asked };
}

describe('planSearch', () => {
  test('a small condition behind a large one drives, and the large one is read only up to the first limit', async () => {
    const { candidates, count, asked } = counting({ status: 50_000, patient: 12 });
    expect(await planSearch(candidates, count)).toEqual({ driver: 1 });
    expect(asked).toEqual([['status', DRIVER_TAKE_AT + 1], ['patient', DRIVER_TAKE_AT + 1]]);
  });

  test('the first small one is taken without counting the rest', async () => {
    const { candidates, count, asked } = counting({ compartment: 80, code: 30, date: 10 });
    expect(await planSearch(candidates, count)).toEqual({ driver: 'compartment' });
    expect(asked).toEqual([['compartment', DRIVER_TAKE_AT + 1]]);
  });

  test('when none is small, the fewest rows up to the maximum drive; counted again up to it', async () => {
    const { candidates, count, asked } = counting({ a: 1500, b: 900, c: 40_000 });
    expect(await planSearch(candidates, count)).toEqual({ driver: 1 });
    expect(asked.filter(([, limit]) => limit === DRIVER_MAX_ROWS + 1).map(([sql]) => sql)).toEqual(['a', 'b', 'c']);
  });

  test('no candidate within the maximum: no driver (the type is read in sort order)', async () => {
    const { candidates, count } = counting({ a: 5000, b: 2001 });
    expect(await planSearch(candidates, count)).toEqual({});
    expect(await planSearch([], count)).toEqual({});
  });

  test('a lone candidate is counted once, up to the maximum, and drives within it', async () => {
    for (const [rows, plan] of [[150, { driver: 0 }], [1500, { driver: 0 }], [DRIVER_MAX_ROWS + 5, {}]] as const) {
      const { candidates, count, asked } = counting({ date: rows });
      expect(await planSearch(candidates, count)).toEqual(plan);
      expect(asked).toEqual([['date', DRIVER_MAX_ROWS + 1]]);
    }
  });

  test('each candidate statement has the limit planSearch asks for written in, not bound', () => {
    const [c] = driverCandidates(SQLITE, 't1', { type: 'Observation', where: [{ kind: 'token', param: 'code', values: [{ value: 'x' }] }], sort: [] } as never);
    // Four values of its own (tenant, type, parameter, code), and no placeholder for the limit.
    const { sql, values } = c!.count(DRIVER_TAKE_AT + 1);
    expect(values).toEqual(['t1', 'Observation', 'code', 'x']);
    expect(sql).toMatch(new RegExp(`LIMIT ${DRIVER_TAKE_AT + 1}\\) x$`));
    expect(sql).not.toContain('?5');
    expect(c!.count(DRIVER_MAX_ROWS + 1).sql).toMatch(new RegExp(`LIMIT ${DRIVER_MAX_ROWS + 1}\\) x$`));
  });

  test('references to resources are counted first, then the other conditions in the query\'s order', () => {
    const where = [
      { kind: 'token', param: 'clinical-status', values: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', value: 'active' }] },
      { kind: 'date', param: 'onset-date', tests: [{ op: 'le', low: 0, high: 1 }] },
      { kind: 'token', param: 'patient', values: [{ system: 'Patient', value: 'p1' }], reference: true },
    ];
    const candidates = driverCandidates(SQLITE, 't1', { type: 'Condition', where, sort: [] } as never);
    expect(candidates.map((c) => c.driver)).toEqual([2, 0, 1]);
    const withCompartment = driverCandidates(SQLITE, 't1', { type: 'Condition', where, compartment: 'p1', sort: [] } as never);
    expect(withCompartment.map((c) => c.driver)).toEqual(['compartment', 2, 0, 1]);
  });

  test('the search compiler marks references to resources, not :identifier or tokens', () => {
    const compiled = (query: string) => compileSearch('Condition', new URLSearchParams(query), true).pending;
    expect(compiled('patient=p1')).toEqual([{ kind: 'token', param: 'subject', values: [{ system: 'Patient', value: 'p1' }], reference: true }]);
    expect(compiled('subject=Patient/p1')[0]).toMatchObject({ reference: true });
    expect(compiled('clinical-status=active')[0]).not.toHaveProperty('reference');
    expect(compiled('patient:identifier=urn:mrn|1')[0]).not.toHaveProperty('reference');
  });
});
