/**
 * What a Coding, an Identifier and an Attachment say about themselves, checked whatever their element's binding:
 * - a Coding's and an Identifier's system is an absolute URI: it names a code system, or the namespace of
 *   the identifier's values, for anyone who reads it (R4 Coding.system: "a URI"; references to OIDs and
 *   UUIDs are `urn:oid:`/`urn:uuid:`), and HL7's validator refuses a local name there ("must be an
 *   absolute reference, not a local reference"), as Cinder's `$validate-code` does for a Coding;
 * - a Coding whose system is one of R4's own code systems (`http://hl7.org/fhir/...`, content
 *   `complete`, all of version 4.0.1 and case-sensitive) holds one of its codes. R4 fixes those systems'
 *   codes (terminologies.html: a code is "defined by the code system"), and HL7's validator reports any
 *   other as an unknown code at every binding strength, or with none. A Coding of another version of the
 *   system (`version` other than 4.0.1) is not judged; nor are terminology.hl7.org's systems, which grow
 *   after R4 (a code added to v3-ActCode since is valid).
 * - a Coding's system is not a ValueSet of the specification (`http://hl7.org/fhir/ValueSet/...`): a
 *   system names a code system, never a value set (HL7's validator says the same).
 * - an Attachment's `size` is the number of bytes of its `data` (R4 Attachment.size: "the number of
 *   bytes of data that make up this attachment (before base64 encoding)"), when both are given.
 * - what R4 defines as "An absolute URI" (a canonical resource's `url`, a ValueSet's include system, a
 *   ConceptMap group's source and target) has a scheme (RFC 3986 4.3), or is a `#id` fragment naming a
 *   contained resource: R4's own example ValueSet `example-hierarchical` includes the system `#hacked`,
 *   its contained CodeSystem (HL7's validator now refuses that for an include's system and asks for the
 *   code system's URL with the valueset-system extension, a later convention); one that is a `urn:uuid:` holds a
 *   UUID (RFC 4122), as HL7's validator requires ("UUIDs must be valid and lowercase"); one in capitals is a
 *   warning, as R4's own CapabilityStatement and TerminologyCapabilities examples write theirs. Transactions' temporary ids, often no UUIDs, are fullUrls and references, which are not held
 *   to it.
 */
import { coreCodeSystem, CORE_CODE_SYSTEM_VERSION } from './model.ts';
import { ucumCodeProblem } from '../ucum-syntax.ts';
import { base64Bytes, primed } from './large-strings.ts';

type Json = Record<string, unknown>;

/** The walk's state these checks need. */
export interface CodingScope {
  add(code: 'code-invalid' | 'value', expression: string, text: string, severity?: 'error' | 'warning'): void;
}

/** RFC 3986's scheme, which an absolute URI starts with. */
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;

/** A value R4 defines as an absolute URI, at `path`. */
export function checkAbsolute(scope: CodingScope, uri: string, path: string): void {
  if (!isAbsolute(uri)) {
    scope.add('value', path, `${JSON.stringify(uri)} is not an absolute URI (it has no scheme, such as http:, https: or urn:), which R4 requires here`);
  } else if (uri.startsWith('urn:uuid:') && !UUID.test(uri.slice(9))) {
    const uuid = uri.slice(9);
    if (!UUID.test(uuid.toLowerCase())) scope.add('value', path, `${JSON.stringify(uri)} is no UUID URI: a UUID is 32 hexadecimal digits in groups of 8-4-4-4-12 (RFC 4122)`);
    else scope.add('value', path, `${JSON.stringify(uri)} should write its UUID in lowercase, as R4's uuid type does (urn:uuid:${uuid.toLowerCase()})`, 'warning');
  }
}

/** R4's `uuid` after `urn:uuid:` (datatypes.html: RFC 4122, lowercase). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const VALUE_SET_BASE = 'http://hl7.org/fhir/ValueSet/';

/**
 * A Coding at `path`: its system is an absolute URI, and its code is one of its system's, when the
 * system is one of R4's own.
 */
export function checkCoding(scope: CodingScope, coding: Json, path: string): void {
  const { system, code, version } = coding;
  if (typeof system !== 'string') return;
  if (!isAbsolute(system)) {
    scope.add('value', `${path}.system`, `The system ${JSON.stringify(system)} is not an absolute URI: a Coding's system names its code system by URL (http://loinc.org, urn:oid:..., urn:uuid:...), not by a local name`);
    return;
  }
  if (system.startsWith(VALUE_SET_BASE)) {
    scope.add('code-invalid', `${path}.system`, `The system ${JSON.stringify(system)} is a ValueSet of the specification, not a code system: a Coding's system names the code system that defines its code`);
    return;
  }
  if (system === UCUM && typeof code === 'string') {
    checkUnit(scope, code, `${path}.code`);
    return;
  }
  if (system === SNOMED_CT && typeof code === 'string') {
    const problem = sctidProblem(code);
    if (problem !== undefined) scope.add('code-invalid', `${path}.code`, `Unknown code ${JSON.stringify(code)} in the code system ${SNOMED_CT}: ${problem}`);
    return;
  }
  if (typeof code !== 'string' || (version !== undefined && version !== CORE_CODE_SYSTEM_VERSION)) return;
  const codes = coreCodeSystem(system);
  if (codes !== undefined && !codes.has(code)) {
    scope.add('code-invalid', `${path}.code`, `Unknown code ${JSON.stringify(code)} in the code system ${system} (FHIR R4 ${CORE_CODE_SYSTEM_VERSION})${listed(codes)}`);
  }
}

const UCUM = 'http://unitsofmeasure.org';
export const SNOMED_CT = 'http://snomed.info/sct';

/** Verhoeff's multiplication and permutation tables, by which an SCTID's last digit checks the others. */
const VERHOEFF_D = ['0123456789', '1234067895', '2340178956', '3401289567', '4012395678', '5987604321', '6598710432', '7659821043', '8765932104', '9876543210'].map((r) => [...r].map(Number));
const VERHOEFF_P = ['0123456789', '1576283094', '5803796142', '8916043527', '9453126870', '4286573901', '2793806415', '7046913258'].map((r) => [...r].map(Number));

/** Characters of SNOMED CT's compositional grammar beyond an SCTID: a code holding one is an expression, not judged. */
const EXPRESSION = /[\s:=|+{}(),<>^!*#"]/;

/**
 * undefined when `code` can be a SNOMED CT concept: an SCTID (SNOMED CT's identifier specification: 6 to
 * 18 digits, no leading zero, a concept's partition `00` or `10` before its Verhoeff check digit), or an
 * expression of the compositional grammar (`71341001:272741003=7771000`), which is not parsed here. Else why
 * not: HL7's validator reports such a code as unknown to SNOMED CT, and no edition can hold it.
 */
export function sctidProblem(code: string): string | undefined {
  if (EXPRESSION.test(code)) return undefined;
  if (!/^[1-9][0-9]{5,17}$/.test(code)) return 'a SNOMED CT concept id is 6 to 18 digits, not starting with 0';
  const partition = code.slice(-3, -1);
  if (partition !== '00' && partition !== '10') return `its partition identifier '${partition}' is not a concept's (00 or 10): it identifies a description, a relationship or another component`;
  let check = 0;
  for (let i = 0; i < code.length; i++) check = VERHOEFF_D[check]![VERHOEFF_P[i % 8]![code.charCodeAt(code.length - 1 - i) - 48]!]!;
  return check === 0 ? undefined : 'its check digit is wrong (Verhoeff)';
}

/**
 * A Quantity (or Age, Duration...) at `path`: a UCUM `code` is a UCUM unit, and a SNOMED CT one (a unit
 * of presentation, `732936001` Tablet) can be a concept, as a Coding's code (HL7's validator checks a
 * Quantity's system and code as it checks a Coding's).
 */
export function checkQuantity(scope: CodingScope, quantity: Json, path: string): void {
  const { system, code } = quantity;
  if (typeof code !== 'string') return;
  if (system === UCUM) checkUnit(scope, code, `${path}.code`);
  else if (system === SNOMED_CT) {
    const problem = sctidProblem(code);
    if (problem !== undefined) scope.add('code-invalid', `${path}.code`, `Unknown code ${JSON.stringify(code)} in the code system ${SNOMED_CT}: ${problem}`);
  }
}

/** What is wrong with UCUM codes met, by code (most resources repeat a few units; bounded). */
const unitProblems = new Map<string, string | null>();
const MAX_REMEMBERED_UNITS = 4096;

/** undefined when `code` is a UCUM unit code, or why not (memoised). */
export function unitProblem(code: string): string | undefined {
  let problem = unitProblems.get(code);
  if (problem === undefined) {
    problem = ucumCodeProblem(code) ?? null;
    if (unitProblems.size >= MAX_REMEMBERED_UNITS) unitProblems.clear();
    if (code.length <= 256) unitProblems.set(code, problem);
  }
  return problem ?? undefined;
}

/**
 * A code of UCUM (http://unitsofmeasure.org) at `path` is a UCUM unit: valid syntax of the essence's
 * atoms and prefixes (ucum-syntax.ts). HL7's validator reports another as an unknown code of the code
 * system, an error (with the UCUM library's reason as information); so does Cinder, with the reason.
 */
function checkUnit(scope: CodingScope, code: string, path: string): void {
  const problem = unitProblem(code);
  // A long code (as long as the request may be) is quoted shortened.
  const shown = code.length > 60 ? `${code.slice(0, 57)}...` : code;
  if (problem !== undefined) scope.add('code-invalid', path, `Unknown code ${JSON.stringify(shown)} in the code system ${UCUM}: it is no UCUM unit (${problem})`);
}

/**
 * An Identifier at `path`: its system is an absolute URI, the namespace of its values (HL7's validator:
 * "Identifier.system must be an absolute reference, not a local reference").
 */
export function checkIdentifier(scope: CodingScope, identifier: Json, path: string): void {
  const { system } = identifier;
  if (typeof system === 'string' && !isAbsolute(system)) {
    scope.add('value', `${path}.system`, `The system ${JSON.stringify(system)} is not an absolute URI: an Identifier's system names the namespace of its values by URL (http://hospital.example.org/mrn, urn:oid:...), not by a local name`);
  }
}

/** RFC 3986's absolute URI, or a `#id` fragment (checkAbsolute). */
function isAbsolute(uri: string): boolean {
  return SCHEME.test(uri) || uri.charCodeAt(0) === 0x23;
}

/** The codes, so that a developer can see what was meant, when there are few. */
function listed(codes: ReadonlySet<string>): string {
  return codes.size > 12 ? '' : `: one of ${[...codes].join(', ')}`;
}

/** An Attachment at `path`: its `size` is its `data`'s number of bytes. */
export function checkAttachment(scope: CodingScope, attachment: Json, path: string): void {
  const { data, size } = attachment;
  if (typeof data !== 'string' || typeof size !== 'number') return;
  // A large `data` read in slices before this validation (primeStrings): its count, not a pass over it here.
  const profile = primed(data);
  const bytes = profile ? profile.base64Bytes : base64Bytes(data);
  if (bytes !== undefined && bytes !== size) {
    scope.add('value', `${path}.size`, `The attachment's size is ${size}, but its data holds ${bytes} bytes (size counts the bytes before base64 encoding)`);
  }
}
