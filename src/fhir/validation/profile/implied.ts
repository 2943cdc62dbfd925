/**
 * The profiles R4 requires of a resource without its claiming them: observation-vitalsigns says that an
 * Observation of a vital sign SHALL conform to its vital signs profile. HL7's validator (R4 and later)
 * checks an Observation whose `code` holds one of the codes below against the profile they stand for,
 * whether or not `meta.profile` names it, at the severities the profile gives (an error for a missing
 * LOINC code, category or unit). Its lists are followed here, in its order: the first group with a
 * matching coding decides (the LOINC groups before the SNOMED CT ones), so an Observation gets one
 * profile at most.
 */

type Json = Record<string, unknown>;

const LOINC = 'http://loinc.org';
const SNOMED = 'http://snomed.info/sct';
const SD = 'http://hl7.org/fhir/StructureDefinition/';

interface ImpliedGroup {
  /** The profile's id in R4 (`bodytemp`: http://hl7.org/fhir/StructureDefinition/bodytemp). */
  id: string;
  name: string;
  system: typeof LOINC | typeof SNOMED;
  codes: ReadonlySet<string>;
}

const group = (id: string, name: string, system: ImpliedGroup['system'], codes: string): ImpliedGroup => ({ id, name, system, codes: new Set(codes.split(' ')) });

const GROUPS: readonly ImpliedGroup[] = [
  group('vitalspanel', 'Vital Signs Panel', LOINC, '85353-1'),
  group('resprate', 'Respiratory Rate', LOINC, '9279-1 76170-0 76172-6 76171-8 19840-8 33438-3 76270-8 11291-2'),
  group('heartrate', 'Heart rate', LOINC, '60978-4 73795-7 73799-9 76476-1 76477-9 8867-4 8889-8 8890-6 8891-4 8892-2 8893-0 40443-4 55425-3 68999-2 11328-2 69000-8 8886-4'),
  group('oxygensat', 'Oxygen saturation', LOINC, '2708-6 19224-5 20564-1 2709-4 2710-2 2713-6 51733-4 59408-5 59417-6 89276-0 97549-0'),
  group('bodytemp', 'Body temperature', LOINC, '8310-5 60834-9 60835-6 60836-4 60838-0 60955-2 61009-7 75539-7 75987-8 76010-8 76011-6 76278-1 8309-7 8328-7 8329-5 8330-3 8331-1 8332-9 8333-7 8334-5 91371-5 98657-0 98663-8'),
  group('bodyheight', 'Body height', LOINC, '8302-2 3137-7 3138-5 8306-3 8308-9'),
  group('headcircum', 'Head circumference', LOINC, '9843-4 8287-5'),
  group('bodyweight', 'Body weight', LOINC, '29463-7 3141-9 3142-7 75292-3 79348-9 8350-1 8351-9'),
  group('bmi', 'Body mass index', LOINC, '39156-5 89270-3'),
  group('bp', 'Blood pressure systolic and diastolic', LOINC, '85354-9 35094-2 8459-0 76534-7 55284-4 8480-6'),
  group('vitalspanel', 'Vital Signs Panel', SNOMED, '46680005'),
  group('resprate', 'Respiratory Rate', SNOMED, '86290005 271625008 271306003'),
  group('heartrate', 'Heart rate', SNOMED, '271306003 249043002 444981005 399017001 251670001 429525003 429614003'),
  group('oxygensat', 'Oxygen saturation', SNOMED, '442476006 431314004'),
  group('bodytemp', 'Body temperature', SNOMED, '386725007 276885007 300076005 1222808002 364246006 307047009 708499008 431598003 698831002 698832009 415882003 415974002 415929009 415945006'),
  group('bodyheight', 'Body height', SNOMED, '1153637007 1162419008 50373000 1162418000 1230278008 1162392001 1162417005'),
  group('headcircum', 'Head circumference', SNOMED, '363812007 169876006 1269262007 363811000'),
  group('bodyweight', 'Body weight', SNOMED, '735395000 425024002 424927000 784399000 1162416001 1162415002'),
  group('bmi', 'Body mass index', SNOMED, '60621009'),
  group('bp', 'Blood pressure systolic and diastolic', SNOMED, '251076008 163033001 163035008 386534000 386536003 271649006 271650006 407556006 407554009 716579001 399304008'),
];

export interface ImpliedProfile {
  /** The profile's canonical URL. */
  url: string;
  /** Why it applies, for `$validate` to tell (HL7's validator says it as information too). */
  why: string;
}

/** The profile R4 requires of `resource` though it may not claim it (an Observation of a vital sign), or undefined. */
export function impliedProfile(resource: Json): ImpliedProfile | undefined {
  if (resource.resourceType !== 'Observation') return undefined;
  const code = resource.code;
  if (typeof code !== 'object' || code === null || Array.isArray(code)) return undefined;
  const codings = (code as Json).coding;
  if (!Array.isArray(codings)) return undefined;
  for (const g of GROUPS) {
    for (const c of codings) {
      if (typeof c !== 'object' || c === null || (c as Json).system !== g.system) continue;
      const value = (c as Json).code;
      if (typeof value === 'string' && g.codes.has(value)) {
        const url = SD + g.id;
        return { url, why: `Observation validated against the ${g.name} profile (${url}), which the FHIR specification requires of it because it has the ${g.system === LOINC ? 'LOINC' : 'SNOMED CT'} code ${value}` };
      }
    }
  }
  return undefined;
}
