import { describe, expect, test } from 'bun:test';
import { encodeProgress, encodeSpec, JOB_DATA_VERSION, JobDataError, readPlan, readProgress } from '../../src/export/job-data.ts';
import { initialProgress, planSteps, type ExportSpec, type Step } from '../../src/export/spec.ts';
import v0 from '../fixtures/export/job-v0.json' with { type: 'json' };

const spec: ExportSpec = {
  level: 'group', groupId: 'g1', types: ['Patient', 'Condition'], since: Date.parse('2025-01-01T00:00:00Z'),
  filters: { Condition: [[{ kind: 'token', param: 'code', values: [{ value: 'x' }] }, { kind: 'lastUpdated', tests: [{ op: 'ge', low: 1, high: 2 }] }]] },
  compartment: 'job', joinedSince: true, provenance: 'relevant', issues: [{ severity: 'warning', code: 'not-supported', details: { text: 'w' } }],
};

describe('export job data', () => {
  test('a new job stores its version and its planned steps, and reads back what was written', () => {
    const text = encodeSpec(spec);
    const stored = JSON.parse(text) as { version: number; steps: unknown[] };
    // Without _filter's newer comparisons, the version the release before this one reads.
    expect(stored.version).toBe(2);
    expect(stored.steps).toEqual(planSteps(spec));
    expect(readPlan({ spec: text })).toEqual({ spec, steps: planSteps(spec) });
    const progress = { ...initialProgress(), step: 1, after: 42, files: [{ kind: 'output' as const, type: 'Patient', subject: 'Patient', name: 'Patient.1.ndjson', key: 'k', count: 3, bytes: 9 }] };
    expect(readProgress({ progress: encodeProgress(progress) })).toEqual(progress);
  });

  test("_filter's case-folded, unequal and ordering comparisons make a job of data version 3, which a release reading 2 refuses", () => {
    const uses: ExportSpec['filters'][string][number][] = [
      [{ kind: 'token', param: 'code', values: [{ value: 'x' }], fold: true }],
      [{ kind: 'not', condition: { kind: 'token', param: 'code', values: [{ value: 'x' }], unequal: true } }],
      [{ kind: 'or', any: [{ kind: 'string', param: 'name', values: [{ value: 'a', match: 'gt' }] }] }],
      [{ kind: 'chain', param: 'subject', targetType: 'Patient', where: [{ kind: 'date', param: 'birthdate', tests: [{ op: 'co', low: 1, high: 2 }] }] }],
    ];
    expect(JOB_DATA_VERSION).toBe(3);
    for (const conditions of uses) {
      for (const withIt of [{ ...spec, filters: { Condition: [conditions] } }, { ...spec, scopeFilters: { Condition: [conditions] } }]) {
        const text = encodeSpec(withIt);
        expect((JSON.parse(text) as { version: number }).version).toBe(3);
        expect(readPlan({ spec: text })).toEqual({ spec: withIt, steps: planSteps(withIt) });
      }
    }
  });

  test("a Patient or Group job's Provenance of the compartments is stored with its target types and planned as a step", () => {
    const compartment: ExportSpec = { ...spec, provenance: 'compartment', provenanceTargets: { Observation: [], Patient: [[{ kind: 'token', param: 'gender', values: [{ value: 'female' }] }]] } };
    const text = encodeSpec(compartment);
    // With `_since`, a Group job also takes the older Provenance of the members who joined since.
    const types: Step[] = [{ kind: 'type', type: 'Patient' }, { kind: 'type', type: 'Condition' }];
    expect(readPlan({ spec: text })).toEqual({ spec: compartment, steps: [...types, { kind: 'provenance', mode: 'compartment' }, { kind: 'provenance-joined', mode: 'compartment' }, { kind: 'errors' }] });
    const { since: _, ...whole } = compartment;
    expect(planSteps({ ...whole, joinedSince: false })).toEqual([...types, { kind: 'provenance', mode: 'compartment' }, { kind: 'errors' }]);
    const latest: ExportSpec = { ...spec, provenance: 'latest' };
    expect(readPlan({ spec: encodeSpec(latest) }).steps).toEqual([...types, { kind: 'provenance-scan' }, { kind: 'provenance-scan-joined' }, { kind: 'provenance-emit' }, { kind: 'errors' }]);
  });

  test('a resumed job runs the plan it was stored with, not the one current code would make', () => {
    const stored = JSON.parse(encodeSpec(spec)) as Record<string, unknown>;
    stored.steps = [{ kind: 'type', type: 'Condition' }, { kind: 'errors' }];
    expect(readPlan({ spec: JSON.stringify(stored) }).steps).toEqual([{ kind: 'type', type: 'Condition' }, { kind: 'errors' }]);
  });

  test('data of the release before versioning (version 0) is read, with the plan that release made', () => {
    const plan = readPlan({ spec: v0.spec });
    expect(plan.steps).toEqual(v0.plan as typeof plan.steps);
    expect(plan.spec.types).toEqual(['Patient', 'Observation']);
    expect(readProgress({ progress: v0.progress }, plan.steps)).toEqual(initialProgress());
  });

  test('a newer data version, an unknown step, malformed data: JobDataError saying why', () => {
    const newer = JSON.stringify({ ...JSON.parse(encodeSpec(spec)), version: JOB_DATA_VERSION + 1 });
    expect(() => readPlan({ spec: newer })).toThrow(JobDataError);
    expect(() => readPlan({ spec: newer })).toThrow(/another version of Cinder/);
    const unknownStep = JSON.stringify({ ...JSON.parse(encodeSpec(spec)), steps: [{ kind: 'teleport' }] });
    expect(() => readPlan({ spec: unknownStep })).toThrow(/steps\.0/);
    expect(() => readPlan({ spec: '{"level":"galaxy"}' })).toThrow(JobDataError);
    expect(() => readPlan({ spec: 'not json' })).toThrow(/not JSON/);
    expect(() => readProgress({ progress: '{"step":-1}' })).toThrow(JobDataError);
    expect(() => readProgress({ progress: encodeProgress({ ...initialProgress(), step: 9 }) }, planSteps(spec))).toThrow(/step 10 of a plan of 5/);
  });
});
