/**
 * The patch engines, table-driven: HL7's FHIRPath Patch cases (fhir-test-cases r5/patch/fhir-patch-tests.xml,
 * converted by scripts/gen-fhirpath-patch-tests.ts) and RFC 6902's JSON Patch examples
 * (fhir-test-cases r4/patch/json-patch-tests.json), plus paths and errors the tables do not cover.
 */
import { describe, expect, test } from 'bun:test';
import { FhirError } from '../../../src/errors.ts';
import { applyFhirPathPatch, parseFhirPathPatch } from '../../../src/fhir/patch/fhirpath-patch.ts';
import { applyJsonPatch, parseJsonPatch } from '../../../src/fhir/patch/json-patch.ts';
import fhirPathCases from '../../fixtures/patch/fhirpath-patch-tests.json' with { type: 'json' };
import jsonPatchCases from '../../fixtures/patch/json-patch-tests.json' with { type: 'json' };

type Json = Record<string, any>;

const fhirPatch = (resource: Json, params: Json): Json => applyFhirPathPatch(resource, parseFhirPathPatch(params));

/** A Parameters of `operation` parameters, each given as its parts. */
function params(...ops: Json[]): Json {
  return {
    resourceType: 'Parameters',
    parameter: ops.map(({ value, ...rest }) => ({
      name: 'operation',
      part: [
        ...Object.entries(rest).map(([name, v]) => (typeof v === 'number' ? { name, valueInteger: v } : { name, valueString: v })),
        ...(value === undefined ? [] : [{ name: 'value', ...value }]),
      ],
    })),
  };
}

function failure(f: () => unknown): FhirError {
  try {
    f();
  } catch (err) {
    if (err instanceof FhirError) return err;
    throw err;
  }
  throw new Error('expected a FhirError');
}

describe('FHIRPath Patch: the HL7 test cases', () => {
  for (const c of fhirPathCases as Json[]) {
    test(c.name, () => {
      const input = structuredClone(c.input);
      if (c.error !== undefined) {
        const err = failure(() => fhirPatch(input, c.patch));
        expect(err.status).toBe(400);
        expect(err.message.toLowerCase()).toContain('no content found at');
      } else {
        expect(fhirPatch(input, c.patch)).toEqual(c.output);
      }
      expect(input).toEqual(c.input);
    });
  }
});

describe('JSON Patch: the RFC 6902 examples', () => {
  for (const c of jsonPatchCases as Json[]) {
    test(c.comment, () => {
      const ops = parseJsonPatch(c.patch);
      // A failing `test` is a 422 (http.html, patch); the other failures 400.
      if (c.error !== undefined) expect(failure(() => applyJsonPatch(c.doc, ops)).status).toBe(ops.some((o) => o.op === 'test') ? 422 : 400);
      else expect(applyJsonPatch(c.doc, ops)).toEqual(c.expected);
    });
  }

  test('copy, replace of the whole document, and ~1 in pointers', () => {
    const doc = { 'a/b': { c: [1] }, d: 1 };
    expect(applyJsonPatch(doc, parseJsonPatch([{ op: 'copy', from: '/a~1b/c', path: '/e' }, { op: 'add', path: '/e/-', value: 2 }]))).toEqual({ 'a/b': { c: [1] }, d: 1, e: [1, 2] });
    expect(applyJsonPatch(doc, parseJsonPatch([{ op: 'replace', path: '', value: { x: 1 } }]))).toEqual({ x: 1 });
  });

  test('malformed documents are 400 structure; failures name the operation and change nothing', () => {
    for (const bad of [{}, [1], [{ op: 'jump', path: '/a' }], [{ op: 'add', path: 'a', value: 1 }], [{ op: 'add', path: '/a' }], [{ op: 'move', path: '/a' }], [{ op: 'remove', path: '/a~2' }]]) {
      const err = failure(() => parseJsonPatch(bad));
      expect([err.status, err.issues[0]!.code]).toEqual([400, 'structure']);
    }
    const doc = { a: [1, 2] };
    const err = failure(() => applyJsonPatch(doc, parseJsonPatch([{ op: 'remove', path: '/a/0' }, { op: 'remove', path: '/a/5' }])));
    expect([err.status, err.issues[0]!.code]).toEqual([400, 'processing']);
    expect(err.message).toContain('operation 1 (remove /a/5)');
    expect(doc).toEqual({ a: [1, 2] });
    expect(failure(() => applyJsonPatch(doc, parseJsonPatch([{ op: 'add', path: '/a/01', value: 0 }]))).status).toBe(400);
    expect(failure(() => applyJsonPatch(doc, parseJsonPatch([{ op: 'move', from: '/a', path: '/a/0' }]))).status).toBe(400);
  });
});

describe('FHIRPath Patch: paths', () => {
  const patient = {
    resourceType: 'Patient',
    identifier: [{ system: 'a', value: '1' }, { system: 'b', value: '2', use: 'official' }, { system: 'b', value: '3' }],
    name: [{ family: 'X', given: ['A', 'B'] }],
    extension: [{ url: 'http://e/1', valueString: 'one' }, { url: 'http://e/2', valueCode: 'two' }],
    contained: [{ resourceType: 'Organization', id: 'o', name: 'Org' }],
  };
  const replace = (path: string, value: Json) => fhirPatch(patient, params({ type: 'replace', path, value }));

  test('where() with the engine, first(), last(), indexers, extension(url), ofType()', () => {
    expect(replace("Patient.identifier.where(system = 'b' and use.exists()).value", { valueString: 'x' }).identifier[1].value).toBe('x');
    expect(replace("Patient.identifier.where(system = 'b').last().value", { valueString: 'x' }).identifier[2].value).toBe('x');
    expect(replace('Patient.identifier.first().value', { valueString: 'x' }).identifier[0].value).toBe('x');
    expect(replace('Patient.name[0].given[1]', { valueString: 'C' }).name[0].given).toEqual(['A', 'C']);
    expect(replace("Patient.extension('http://e/2').value", { valueCode: 'deux' }).extension[1]).toEqual({ url: 'http://e/2', valueCode: 'deux' });
    expect(replace("Patient.extension.where(url = 'http://e/1').value.ofType(string)", { valueString: 'uno' }).extension[0].valueString).toBe('uno');
    expect(replace('Patient.contained.ofType(Organization).name', { valueString: 'New' }).contained[0].name).toBe('New');
  });

  test('skip(), take(), tail(), a path without the type name, Resource, and a resource value', () => {
    expect(replace('identifier.skip(1).take(1).value', { valueString: 'x' }).identifier.map((i: Json) => i.value)).toEqual(['1', 'x', '3']);
    expect(replace('Patient.identifier.tail().last().value', { valueString: 'x' }).identifier[2].value).toBe('x');
    const org = { resourceType: 'Organization', id: 'o2' };
    expect(fhirPatch(patient, params({ type: 'add', path: 'Resource', name: 'contained', value: { resource: org } })).contained).toEqual([patient.contained[0], org]);
  });

  test('replace of a choice element takes the new type name', () => {
    const out = replace("Patient.extension('http://e/1').value", { valueBoolean: true });
    expect(out.extension[0]).toEqual({ url: 'http://e/1', valueBoolean: true });
  });

  test('delete: of nothing is a no-op; of one list item; of several is an error', () => {
    expect(fhirPatch(patient, params({ type: 'delete', path: 'Patient.birthDate' }))).toEqual(patient);
    expect(fhirPatch(patient, params({ type: 'delete', path: "Patient.identifier.where(value = '2')" })).identifier.map((i: Json) => i.value)).toEqual(['1', '3']);
    const err = failure(() => fhirPatch(patient, params({ type: 'delete', path: 'Patient.identifier' })));
    expect([err.status, err.issues[0]!.expression]).toEqual([400, ['Parameters.parameter[0]']]);
    expect(err.message).toContain('selects 3 elements');
  });

  test('add: to a list, a choice element by its value type, a non-repeating element that exists is an error', () => {
    expect(fhirPatch(patient, params({ type: 'add', path: 'Patient', name: 'identifier', value: { valueIdentifier: { value: '4' } } })).identifier).toHaveLength(4);
    const obs = { resourceType: 'Observation', status: 'final', code: { text: 'x' } };
    expect(fhirPatch(obs, params({ type: 'add', path: 'Observation', name: 'value', value: { valueQuantity: { value: 1 } } })).valueQuantity).toEqual({ value: 1 });
    const err = failure(() => fhirPatch(obs, params({ type: 'add', path: 'Observation', name: 'status', value: { valueCode: 'amended' } })));
    expect(err.message).toContain('already has a value');
    expect(failure(() => fhirPatch(obs, params({ type: 'add', path: 'Observation', name: 'nonsense', value: { valueCode: 'a' } }))).message).toContain('no element');
  });

  test('insert and move check their indexes', () => {
    expect(fhirPatch(patient, params({ type: 'insert', path: 'Patient.name[0].given', index: 0, value: { valueString: 'Z' } })).name[0].given).toEqual(['Z', 'A', 'B']);
    expect(fhirPatch(patient, params({ type: 'insert', path: 'Patient.address', index: 0, value: { valueAddress: { city: 'C' } } })).address).toEqual([{ city: 'C' }]);
    expect(failure(() => fhirPatch(patient, params({ type: 'insert', path: 'Patient.identifier', index: 4, value: { valueIdentifier: { value: '9' } } }))).status).toBe(400);
    expect(failure(() => fhirPatch(patient, params({ type: 'move', path: 'Patient.identifier', source: 3, destination: 0 }))).status).toBe(400);
    expect(failure(() => fhirPatch(patient, params({ type: 'insert', path: 'Patient.gender', index: 0, value: { valueCode: 'male' } }))).message).toContain('not a list');
  });

  test('paths that are not supported or not FHIRPath are 400 naming the parameter, never a crash', () => {
    for (const path of ["Patient.identifier | Patient.name", 'Patient.name.select(family)', 'Patient.identifier[%x]', 'Patient.name.where(', "Patient.name.where(resolve() is Patient)", '1 + 1']) {
      const err = failure(() => parseFhirPathPatch(params({ type: 'delete', path })));
      expect([err.status, err.issues[0]!.expression]).toEqual([400, ['Parameters.parameter[0]']]);
    }
    const err = failure(() => fhirPatch(patient, params({ type: 'delete', path: 'Patient.identifier.single()' })));
    expect(err.message).toContain('single() found 3');
    expect(err.status).toBe(400);
  });

  test('malformed Parameters are 400 structure naming the parameter', () => {
    const bad = [
      { resourceType: 'Parameters', parameter: [{ name: 'op' }] },
      params({ type: 'explode', path: 'Patient' }),
      params({ type: 'add', path: 'Patient', value: { valueString: 'x' } }),
      params({ type: 'delete', path: 'Patient.name', name: 'x' }),
      params({ type: 'move', path: 'Patient.name', source: 0 }),
      params({ type: 'delete', path: '' }),
    ];
    for (const p of bad) {
      const err = failure(() => parseFhirPathPatch(p));
      expect([err.status, err.issues[0]!.code, err.issues[0]!.expression]).toEqual([400, 'structure', ['Parameters.parameter[0]']]);
    }
  });
});
