/**
 * Mutation test: valid resources (the benchmark generator's and the FHIR R4 specification's examples),
 * each broken by one kind of defect at a time; the validator must refuse each mutant with an issue
 * whose expression names the broken element.
 */
import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { generatePatients } from '../../../bench/lib/generator.ts';
import { typeModel, type Slot } from '../../../src/fhir/validation/model.ts';
import { validateResource } from '../../../src/fhir/validation/validate.ts';

type Json = Record<string, any>;

/** One element value met in a walk: where it is, its slot, and how to reach it. */
interface Site {
  path: string;
  slot: Slot;
  holder: Json;
  key: string;
  index?: number;
  value: unknown;
}

/** Every element value of `r` (not inside contained resources), in document order. */
function sites(r: Json): Site[] {
  const out: Site[] = [];
  const visit = (obj: Json, type: string, path: string) => {
    const model = typeModel(type);
    if (!model) return;
    for (const key of Object.keys(obj)) {
      const slot = model.slots.get(key);
      if (!slot) continue;
      const at = `${path}.${slot.step}`;
      const value = obj[key];
      const each = (v: unknown, p: string, index?: number) => {
        out.push({ path: p, slot, holder: obj, key, value: v, ...(index === undefined ? {} : { index }) });
        if (!slot.primitive && slot.type !== 'Resource' && v && typeof v === 'object') visit(v as Json, slot.type, p);
      };
      if (Array.isArray(value)) value.forEach((v, i) => each(v, `${at}[${i}]`, i));
      else each(value, at);
    }
  };
  visit(r, r.resourceType, r.resourceType);
  return out;
}

function set(site: Site, v: unknown): void {
  if (site.index === undefined) site.holder[site.key] = v;
  else site.holder[site.key][site.index] = v;
}

/** A defect: applied to a copy of the resource, it returns the expression that must be named, or null when the resource offers no place for it. */
type Defect = (r: Json) => string | null;

const first = (r: Json, pick: (s: Site) => boolean) => sites(r).find(pick);

const DEFECTS: Record<string, Defect> = {
  'unknown element at the root': (r) => ((r.bogusElement = 1), `${r.resourceType}.bogusElement`),
  'unknown nested element': (r) => {
    const s = first(r, (s) => !s.slot.primitive && s.slot.type !== 'Resource' && typeof s.value === 'object' && s.value !== null);
    if (!s) return null;
    (s.value as Json).bogusElement = 'x';
    return `${s.path}.bogusElement`;
  },
  'string where a number or boolean belongs': (r) => {
    const s = first(r, (s) => s.slot.primitive && (typeof s.value === 'number' || typeof s.value === 'boolean'));
    if (!s) return null;
    set(s, String(s.value));
    return s.path;
  },
  'number where a string belongs': (r) => {
    const s = first(r, (s) => s.slot.primitive && typeof s.value === 'string' && s.path.split('.').length > 1 && !s.path.endsWith('.id'));
    if (!s) return null;
    set(s, 42);
    return s.path;
  },
  'an array for a single value': (r) => {
    const s = first(r, (s) => s.slot.element.max === 1 && s.index === undefined && !s.path.endsWith('.id'));
    if (!s) return null;
    set(s, [s.value]);
    return s.path;
  },
  'a single value for a repeating element': (r) => {
    const s = first(r, (s) => s.index === 0 && (s.holder[s.key] as unknown[]).length === 1);
    if (!s) return null;
    s.holder[s.key] = s.value;
    return s.path.replace(/\[0\]$/, '');
  },
  'a required element removed': (r) => {
    const model = typeModel(r.resourceType)!;
    const element = model.bounded.find((e) => e.min > 0 && e.names.some((n) => r[n] !== undefined));
    if (!element) return null;
    for (const n of element.names) delete r[n], delete r['_' + n];
    return `${r.resourceType}.${element.name}`;
  },
  'an impossible date': (r) => {
    const s = first(r, (s) => s.slot.type === 'date' || s.slot.type === 'dateTime');
    if (!s) return null;
    set(s, '2021-02-30');
    return s.path;
  },
  'a dateTime without a time zone': (r) => {
    const s = first(r, (s) => s.slot.type === 'dateTime' || s.slot.type === 'instant');
    if (!s) return null;
    set(s, '2021-03-04T10:11:12');
    return s.path;
  },
  'a code outside its required value set': (r) => {
    const s = first(r, (s) => s.slot.type === 'code' && s.slot.element.binding?.kind === 'codes');
    if (!s) return null;
    set(s, 'not-a-code-of-the-set');
    return s.path;
  },
  'an empty string': (r) => {
    const s = first(r, (s) => s.slot.type === 'string');
    if (!s) return null;
    set(s, '');
    return s.path;
  },
  'an empty object': (r) => {
    const s = first(r, (s) => !s.slot.primitive && s.slot.type !== 'Resource' && s.index !== undefined);
    if (!s) return null;
    set(s, {});
    return s.path;
  },
  'an extension without url': (r) => ((r.extension = [{ valueString: 'x' }]), `${r.resourceType}.extension[0].url`),
  'an extension with a value and extensions': (r) => ((r.extension = [{ url: 'http://e.org', valueString: 'x', extension: [{ url: 'a', valueString: 'y' }] }]), `${r.resourceType}.extension[0]`),
  'a primitive extension misaligned': (r) => {
    const s = first(r, (s) => s.slot.primitive && s.index === 0);
    if (!s) return null;
    s.holder['_' + s.key] = [null, null, { extension: [{ url: 'http://e.org', valueString: 'x' }] }, null, null, null, null, null];
    return s.path.replace(/\[0\]$/, '');
  },
  'two types of one choice element': (r) => {
    const s = first(r, (s) => s.slot.element.choice && s.index === undefined);
    if (!s) return null;
    const other = s.slot.element.names.find((n) => n !== s.key && /Boolean$/.test(n)) ?? s.slot.element.names.find((n) => n !== s.key && /String$/.test(n));
    if (!other) return null;
    s.holder[other] = other.endsWith('Boolean') ? true : 'x';
    return s.path.slice(0, s.path.lastIndexOf('.' + s.slot.element.name) + s.slot.element.name.length + 1);
  },
  'a contained resource with a version': (r) => {
    if (typeModel(r.resourceType)!.slots.get('contained') === undefined) return null;
    r.contained = [{ resourceType: 'Organization', id: 'c1', name: 'x', meta: { versionId: '3' } }];
    r.extension = [...(r.extension ?? []), { url: 'http://e.org/org', valueReference: { reference: '#c1' } }];
    return `${r.resourceType}.contained[0].meta`;
  },
  'a reference to a type the element does not allow': (r) => {
    const s = first(r, (s) => s.slot.type === 'Reference' && s.slot.element.targets !== undefined && !s.slot.element.targets.has('Medication'));
    if (!s) return null;
    set(s, { reference: 'Medication/m1' });
    return `${s.path}.reference`;
  },
};

function corpus(): Json[] {
  const byType = new Map<string, Json>();
  for (const r of generatePatients({ patients: 3, seed: 'mutation' })) if (!byType.has(r.resourceType)) byType.set(r.resourceType, r as Json);
  const examples = ['Patient-example.json', 'Observation-blood-pressure.json', 'Encounter-example.json', 'MedicationRequest-medrx0302.json', 'Questionnaire-f201.json', 'Condition-example.json', 'DiagnosticReport-f201.json', 'Immunization-example.json'];
  const dir = new URL('../../../node_modules/hl7.fhir.r4.examples/', import.meta.url);
  for (const f of examples) byType.set(`example:${f}`, JSON.parse(readFileSync(new URL(f, dir), 'utf8')));
  return [...byType.values()];
}

describe('every kind of defect is refused at its element', () => {
  const resources = corpus();
  test('the corpus is valid before mutation', () => {
    for (const r of resources) expect({ id: `${r.resourceType}/${r.id}`, issues: validateResource(r, 'strict').filter((i) => i.severity === 'error') }).toEqual({ id: `${r.resourceType}/${r.id}`, issues: [] });
  });
  for (const [name, defect] of Object.entries(DEFECTS)) {
    test(name, () => {
      let applied = 0;
      for (const original of resources) {
        const r = structuredClone(original);
        const expression = defect(r);
        if (expression === null) continue;
        applied++;
        const issues = validateResource(r, 'strict').filter((i) => i.severity === 'error');
        expect({ resource: `${original.resourceType}/${original.id}`, named: issues.some((i) => i.expression === expression), issues: issues.map((i) => i.expression) })
          .toMatchObject({ resource: `${original.resourceType}/${original.id}`, named: true });
      }
      // Each defect must have found a place in several resources, or the test proves nothing.
      expect(applied).toBeGreaterThanOrEqual(3);
    });
  }
});
