import { FhirError, type FhirIssue } from '../../errors.ts';
import { unmatchedUrn } from '../bundle-ops.ts';
import type { Resource } from '../resource.ts';
import { mayBeStored, refusedVersion, type PreparedVersion } from '../prepared.ts';
import { requireValid } from '../validation/check.ts';
import type { ValidationLevel } from '../validation/validate.ts';
import type { BatchWriter } from './batches.ts';
import { resolveUrns, type RunReferences } from './run-references.ts';

/** Where an import problem is: an NDJSON line, or a Bundle entry, and the reference concerned. */
export interface IssuePlace {
  line?: number;
  entry?: number;
  reference?: string;
  /** An invalid resource: each of its problems. */
  issues?: FhirIssue[];
}

/** What importing resources outside transaction and batch Bundles needs from the importer. */
export interface LooseContext {
  writer: BatchWriter;
  /** The input's name (ImportIssue.file). */
  file: string;
  /** Whether a version validation refused equals its stored version (importer.ts): then it is queued, to be kept unchanged. */
  sameAsStored(v: PreparedVersion): Promise<boolean>;
  /** CINDER_VALIDATION. */
  validation: ValidationLevel;
  /** The check of the profiles a resource claims (at `strict`; profiles.ts): undefined when it claims none. */
  profiles?: (resource: Resource, at?: string) => Promise<void> | undefined;
  run: RunReferences;
  defer(needs: string[], retry: () => Promise<void>): void;
  /** Counts `count` resources as failed and reports why. */
  fail(message: string, count?: number, place?: IssuePlace): void;
}

/** An NDJSON line's or a collection entry's resource (with an id), and where it came from. */
export interface LooseResource {
  resource: Resource & { id: string };
  line?: number;
  entry?: number;
  /** A collection entry's fullUrl: the run learns it once the resource is queued. */
  fullUrl?: string;
  /** The fullUrls of the other entries of its collection Bundle. */
  local?: ReadonlyMap<string, string>;
}

/**
 * Validates and queues a resource whose `urn:` references (if any; none are looked for in a Bundle resource) are
 * rewritten to what its Bundle or the run wrote under those fullUrls. One referring to a fullUrl not written yet waits for the end of the run
 * (`defer`); then, when still unresolved, it is not imported and each reference is reported.
 */
export async function addLoose(ctx: LooseContext, item: LooseResource, deferrable = true): Promise<void> {
  // A Bundle stored as a resource (a document, a message) refers to its own entries by fullUrl.
  const needs = item.resource.resourceType === 'Bundle' ? [] : resolveUrns(item.resource, ctx.run, item.local);
  if (needs.length && deferrable) return ctx.defer(needs, () => addLoose(ctx, item, false));
  if (needs.length) {
    const at = item.entry === undefined ? '' : `Bundle.entry[${item.entry}]: `;
    const unmatched = item.entry === undefined ? 'matches no fullUrl of a Bundle entry written by this import' : unmatchedUrn(ctx.run);
    needs.forEach((reference, i) => {
      ctx.fail(`${at}reference '${reference}' ${unmatched}`, i === 0 ? 1 : 0, { line: item.line, entry: item.entry, reference });
    });
    return;
  }
  let prepared: PreparedVersion;
  try {
    const at = item.entry === undefined ? undefined : `Bundle.entry[${item.entry}].resource`;
    requireValid(item.resource, ctx.validation, at);
    const profiled = ctx.profiles?.(item.resource, at);
    if (profiled) await profiled;
    prepared = ctx.writer.prepare(item.resource);
    if (item.line !== undefined) prepared.line = item.line;
  } catch (err) {
    if (!(err instanceof FhirError)) throw err;
    // Refused by validation: still the update that changes nothing it may be (batches.ts keeps it unchanged when it
    // equals the stored version), as an NDJSON line is (ndjson.ts).
    const refused = err.category === 'invalid-resource' && mayBeStored(item.resource)
      ? refusedVersion(item.resource, item.resource.id, { message: err.message, issues: err.issues, file: ctx.file, ...(item.entry !== undefined && { entry: item.entry }) })
      : undefined;
    if (refused === undefined || !(await ctx.sameAsStored(refused))) {
      ctx.fail(err.message, 1, { line: item.line, entry: item.entry, issues: err.issues });
      return;
    }
    if (item.line !== undefined) refused.line = item.line;
    await ctx.writer.addPrepared([refused]);
    // Kept as stored: the entries referring to its fullUrl refer to it.
    if (item.fullUrl) ctx.run.written(item.fullUrl, `${item.resource.resourceType}/${item.resource.id}`);
    return;
  }
  await ctx.writer.addPrepared([prepared]);
  if (item.fullUrl) ctx.run.written(item.fullUrl, `${item.resource.resourceType}/${item.resource.id}`);
}
