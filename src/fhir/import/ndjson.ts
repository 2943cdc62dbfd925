import { FhirError, type FhirIssue } from '../../errors.ts';
import { openStringPath } from '../exact-json.ts';
import { mayBeStored, prepareVersion, refusedVersion, type PreparedVersion } from '../prepared.ts';
import { newId, type Resource } from '../resource.ts';
import { requireValid } from '../validation/check.ts';
import type { ValidationLevel } from '../validation/validate.ts';
import type { LineCheck } from './profiles.ts';
import { parseResource } from './document.ts';
import { MAX_LINE_BYTES, readLines, type Line } from './lines.ts';
import { hasUrnReference } from './run-references.ts';
import { lineId, type LineIds } from './line-ids.ts';

/** A line that could not be imported: 1-based line number and why (an invalid resource: each problem in `issues`). */
export interface LineIssue {
  line: number;
  message: string;
  issues?: FhirIssue[];
}

/**
 * A line whose resource has `urn:` references: left for the importing thread, which knows the
 * fullUrls the run wrote (src/fhir/import/loose.ts). `at`: its place among the chunk's versions.
 */
export interface UrnLine {
  at: number;
  line: number;
  text: string;
}

/** Consecutive lines of an NDJSON input, prepared. */
export interface PreparedChunk {
  versions: PreparedVersion[];
  /** Usually none. */
  urns: UrnLine[];
  issues: LineIssue[];
  /** Input bytes read since the previous chunk. */
  bytes: number;
}

/** A chunk is yielded once it holds this many resources or this many characters of stored text. */
export const CHUNK_RESOURCES = 1000;
export const CHUNK_CHARS = 1 << 20;

/**
 * Reads NDJSON (one resource per line) and prepares each resource for storage (validation at `validation`, and
 * against the profiles it claims with `profiles`; server id where there is none, stamp tail, index entries,
 * compartments), in line order. Blank lines are skipped; bad lines become issues, and so does a resource
 * whose type is not `type` when one is given (an `$import` input names its type). A line with `urn:`
 * references is checked against its profiles where they are resolved (loose.ts). A resource without an id
 * gets a random one, or with `ids` the one of its line (line-ids.ts: an input read again gets the same ids).
 */
export async function* prepareNdjson(blob: Blob, validation: ValidationLevel, base: string | undefined, profiles?: LineCheck, type?: string, ids?: LineIds): AsyncGenerator<PreparedChunk> {
  let chunk: PreparedChunk = { versions: [], urns: [], issues: [], bytes: 0 };
  let chars = 0;
  for await (const lines of readLines(blob.stream(), (n) => (chunk.bytes += n))) {
    for (const { number, text, tooLong, notUtf8 } of lines) {
      if (tooLong === undefined && notUtf8 === undefined && text.trim() === '') continue;
      // Set once the line is a resource of the input's type naming an id it may be stored under: validation may refuse it.
      let named: { resource: Resource; id: string } | undefined;
      try {
        if (tooLong !== undefined) throw new FhirError('too-large', `the line holds ${tooLong} bytes, more than the ${MAX_LINE_BYTES} a line may hold: not read`);
        if (notUtf8 !== undefined) throw lineNotUtf8(notUtf8);
        const resource = parseResource(text);
        if (type !== undefined && resource.resourceType !== type) throw wrongType(resource.resourceType, type);
        if (mayBeStored(resource)) named = { resource, id: resource.id };
        requireValid(resource, validation);
        // The substring test keeps the walk off lines without any `urn:` (most of them).
        if (text.includes('urn:') && resource.resourceType !== 'Bundle' && hasUrnReference(resource)) {
          chunk.urns.push({ at: chunk.versions.length, line: number, text });
        } else {
          // Undefined at once for a resource claiming no profile and no vital sign: such a line costs nothing more. A line
          // whose text names no `extension` or `modifierExtension` key (none spelt with a \u escape) holds
          // none: their walk is skipped.
          const profiled = profiles?.(resource, text.includes('xtension"') || text.includes('\\u'));
          if (profiled) await profiled;
          const v = prepareVersion(resource, resource.id ?? idOfLine(number, ids), base);
          v.line = number;
          chunk.versions.push(v);
          chars += v.tail.length;
        }
      } catch (err) {
        if (named !== undefined && err instanceof FhirError && err.category === 'invalid-resource') {
          // Refused by validation, a line naming its id is still the update that changes nothing it may be: the
          // writer keeps it unchanged when it equals the stored version (rules newer than it), else fails it.
          const v = refusedVersion(named.resource, named.id, { message: err.message, issues: err.issues });
          v.line = number;
          chunk.versions.push(v);
          chars += v.tail.length;
        } else chunk.issues.push(lineIssue(number, err as Error));
      }
      // Failed lines count too: an input of nothing but bad lines is yielded a chunk at a time, never held whole.
      if (chunk.versions.length + chunk.urns.length + chunk.issues.length >= CHUNK_RESOURCES || chars >= CHUNK_CHARS) {
        yield chunk;
        chunk = { versions: [], urns: [], issues: [], bytes: 0 };
        chars = 0;
      }
    }
  }
  if (chunk.versions.length || chunk.urns.length || chunk.issues.length || chunk.bytes) yield chunk;
}

/** The id of an id-less resource at line `line`: its line's with `ids`, else a new random one. */
export function idOfLine(line: number, ids: LineIds | undefined): string {
  return (ids && lineId(ids, line)) ?? newId();
}

/**
 * A line that is not UTF-8 (NDJSON is, Bulk Data's ndjson.org format and FHIR's JSON alike): its first bad byte's
 * offset in the line and in the input and the element whose string holds it (an issue's expression too), not read.
 */
function lineNotUtf8({ error, inInput }: NonNullable<Line['notUtf8']>): FhirError {
  const path = openStringPath(error.before);
  const where = path === undefined ? '' : `, in ${path}`;
  return new FhirError('structure', `the line is not valid UTF-8: ${error.message} of the line, byte offset ${inInput} of the input${where}: not read`, {
    ...(path !== undefined && { expression: [path] }),
    cause: error,
  });
}

/** A resource in an input of another type (the input's `type`, named at `$import`). */
function wrongType(found: string, type: string): FhirError {
  return new FhirError('invalid', `resourceType '${found}' is not the type of this input (${type})`, { expression: ['resourceType'] });
}

function lineIssue(line: number, err: Error): LineIssue {
  const issue: LineIssue = { line, message: err.message };
  // Its problems as the error states them, each with its element where known (an invalid resource's, a bad id's, the
  // element a byte that is not UTF-8 falls in): the error file names them as a REST response would.
  if (err instanceof FhirError) issue.issues = err.issues;
  return issue;
}
