import { FhirError, type FhirIssue } from '../../errors.ts';
import { operatorAccess } from '../access.ts';
import { UnmatchedConditionalReference } from '../bundle-conditional.ts';
import { isUnchangedEntry, unmatchedUrn } from '../bundle-ops.ts';
import type { FhirDeps } from '../crud.ts';
import { carryLiterals, openStringPath } from '../exact-json.ts';
import { isUrnReference, walkReferences } from '../references.ts';
import { asResource, newId, parseBounded, requireStorable, type Resource } from '../resource.ts';
import { processBundle } from '../transaction.ts';
import type { NotUtf8Error } from '../utf8.ts';
import { addLoose, type LooseContext, type LooseResource } from './loose.ts';

type Json = Record<string, unknown>;

/** What a JSON document import needs from the importer. */
export interface DocumentContext extends LooseContext {
  tenant: string;
  fhirBase: string;
  /** Imports this document again, deferring nothing (the retry of a deferred Bundle: re-read, not kept in memory). */
  again(): Promise<void>;
  /** Counts resources written outside the batch writer (transaction and batch Bundles), `unchanged` of them equal to their current version. */
  imported(count: number, unchanged: number): void;
  /**
   * Reports a transaction or batch Bundle's write entry `entry` kept unchanged though validation now refuses it:
   * its response's `issues` (that it is unchanged, then its problems as warnings), as an NDJSON line's are told.
   */
  kept(entry: number, issues: FhirIssue[]): void;
}

/**
 * Parses an import line or document: a JSON object holding a known R4 resource with a valid id, of a
 * type Cinder stores (not Parameters, which has no RESTful endpoint); numbers as written (parseBounded).
 */
export function parseResource(text: string): Resource {
  const value = parseBounded(text, 'The resource', (err) => new FhirError('structure', `malformed JSON: ${err.message}`));
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new FhirError('structure', 'not a JSON object');
  return requireStorable(asResource(value));
}

/**
 * The failure of a document that is not UTF-8 (FHIR JSON and XML are, R4 json.html and xml.html): its first bad
 * byte's offset and text line and, in JSON, the element whose string holds it (the issue's expression too).
 */
export function documentNotUtf8(err: NotUtf8Error, format: DocumentFormat): FhirError {
  const path = format === 'json' ? openStringPath(err.before) : undefined;
  let line = 1;
  for (let nl = err.before.indexOf('\n'); nl >= 0; nl = err.before.indexOf('\n', nl + 1)) line++;
  const where = path === undefined ? '' : `, in ${path}`;
  return new FhirError('structure', `the file is not valid UTF-8: ${err.message}, on line ${line}${where}: not read`, {
    ...(path !== undefined && { expression: [path] }),
    cause: err,
  });
}

/** The formats of an import document: FHIR JSON or FHIR XML (R4 xml.html). */
export type DocumentFormat = 'json' | 'xml';

/**
 * The 400 of FHIR XML that is not FHIR XML, its message led by the element's path (`Patient.nickname: ...`)
 * as an import reports it (the REST API's reader, src/fhir/xml/from-xml.ts, names it in `expression` only).
 */
export function locatedXmlError(err: FhirError): FhirError {
  const at = err.issues[0]?.expression?.[0];
  if (at === undefined || err.message.startsWith(at)) return err;
  return new FhirError('structure', `${at}: ${err.message}`, { expression: [at], cause: err });
}

const methodOf = (entry: unknown) => ((entry as Json | null)?.request as Json | undefined)?.method;
const isWrite = (entry: unknown) => methodOf(entry) !== 'GET';

/**
 * The `urn:` references of a transaction or batch Bundle's POST and PUT entries that match none of
 * its own entries' fullUrls and nothing the run wrote: what the Bundle has to wait for.
 */
function unresolvedUrns(entries: unknown[], ctx: DocumentContext): { entry: number; reference: string }[] {
  const writes = entries.map((e) => (methodOf(e) === 'POST' || methodOf(e) === 'PUT' ? (e as Json) : undefined));
  const own = new Set(writes.map((e) => e?.fullUrl).filter((u) => typeof u === 'string'));
  const out: { entry: number; reference: string }[] = [];
  writes.forEach((e, entry) => {
    walkReferences(e?.resource, ({ reference }) => {
      if (isUrnReference(reference) && !own.has(reference) && !ctx.run.has(reference)) out.push({ entry, reference });
    });
  });
  return out;
}

/**
 * transaction / batch Bundles: FHIR R4 http 3.1.0.11 semantics, as if posted to the FHIR base, with
 * references to the fullUrls of entries other Bundles of the run wrote. One that refers to entries not
 * written yet is deferred to the end of the run; then its unresolved references are reported (a
 * transaction fails whole, a batch loses those entries). A transaction whose conditional reference
 * (`Practitioner?identifier=...`, as Synthea writes) matches nothing yet is retried at the end too; a
 * batch is not, since its other entries are written by then.
 */
async function processTransaction(deps: FhirDeps, ctx: DocumentContext, bundle: Resource, deferrable: boolean): Promise<void> {
  const entries = Array.isArray(bundle.entry) ? (bundle.entry as unknown[]) : [];
  const unresolved = unresolvedUrns(entries, ctx);
  if (unresolved.length && deferrable) return ctx.defer([...new Set(unresolved.map((u) => u.reference))], ctx.again);
  const writes = entries.filter(isWrite).length;
  const prefix = bundle.type === 'transaction' ? 'transaction Bundle rolled back: ' : '';
  const failed = new Set<number>();
  unresolved.forEach(({ entry, reference }, i) => {
    const count = bundle.type === 'transaction' ? (i === 0 ? Math.max(writes, 1) : 0) : failed.has(entry) ? 0 : 1;
    ctx.fail(`${prefix}Bundle.entry[${entry}]: reference '${reference}' ${unmatchedUrn(ctx.run)}`, count, { entry, reference });
    failed.add(entry);
  });
  if (unresolved.length && bundle.type === 'transaction') return;
  await ctx.writer.drain();
  let response: Json;
  try {
    response = await processBundle(deps, { tenant: ctx.tenant, access: operatorAccess }, bundle, ctx.fhirBase, ctx.run);
  } catch (err) {
    if (!(err instanceof FhirError)) throw err;
    // Rolled back whole: retried once at the end of the run, when the files that follow are written.
    if (err instanceof UnmatchedConditionalReference && deferrable) return ctx.defer([], ctx.again);
    // Its OperationOutcome's issues whatever its status (a 412's, a 409's as a 422's), with their expressions.
    ctx.fail(`${bundle.type} Bundle rolled back: ${err.message}`, Math.max(writes, 1), err.issues.length ? { issues: err.issues } : undefined);
    return;
  }
  let ok = 0;
  let unchanged = 0;
  ((response.entry ?? []) as Json[]).forEach((out, i) => {
    // Entries reported above fail on the same unresolved reference.
    if (!isWrite(entries[i]) || failed.has(i)) return;
    const r = out.response as { status: string; outcome?: { issue?: FhirIssue[] } };
    // The status's code alone (`422`, not `422 Unprocessable Entity`), as the import reports it.
    const code = r.status.slice(0, 3);
    if (code.startsWith('2')) {
      ok++;
      if (!isUnchangedEntry(out)) return;
      unchanged++;
      // Unchanged though the rules now refuse it: the update's warnings, told as an NDJSON line kept unchanged is.
      const issues = r.outcome?.issue ?? [];
      if (issues.some((issue) => issue.severity === 'warning')) ctx.kept(i, issues);
    } else {
      // The entry's OperationOutcome whatever its status (400, 404, 409, 412 as 422), its issues' expressions with them.
      const issues = r.outcome?.issue ?? [];
      ctx.fail(`Bundle.entry[${i}]: ${code}: ${withoutEntry(issues[0]?.diagnostics ?? 'failed', i)}`, 1, { entry: i, ...(issues.length ? { issues } : {}) });
    }
  });
  ctx.imported(ok, unchanged);
}

/** A collection Bundle's entry `i` as the resource to import (an id assigned when it has none), or undefined when it holds none that can be stored (reported). */
export function collectionItem(ctx: DocumentContext, entry: unknown, i: number): LooseResource | undefined {
  let resource: Resource;
  try {
    resource = requireStorable(asResource((entry as Json | null)?.resource));
  } catch (err) {
    ctx.fail(`Bundle.entry[${i}].resource: ${(err as Error).message}`, 1, { entry: i });
    return undefined;
  }
  const withId = resource.id === undefined ? carryLiterals(resource, { ...resource, id: newId() }) : (resource as Resource & { id: string });
  const fullUrl = (entry as Json).fullUrl;
  return { resource: withId, entry: i, ...(typeof fullUrl === 'string' ? { fullUrl } : {}) };
}

/**
 * collection Bundles: each entry's resource is created or updated by its id (one is assigned first,
 * so that entries may refer to each other's fullUrls), its `urn:` references resolved as an NDJSON
 * line's are.
 */
async function importCollection(ctx: DocumentContext, bundle: Resource): Promise<void> {
  const entries = Array.isArray(bundle.entry) ? (bundle.entry as unknown[]) : [];
  const items = entries.map((entry, i) => collectionItem(ctx, entry, i)).filter((item) => item !== undefined);
  const local = new Map<string, string>();
  for (const { resource, fullUrl } of items) if (fullUrl !== undefined) local.set(fullUrl, `${resource.resourceType}/${resource.id}`);
  for (const item of items) await addLoose(ctx, { ...item, local });
}

/**
 * Imports one resource read from a document: a transaction or batch Bundle is processed as such, a
 * collection Bundle is unpacked, any other resource (including other Bundle types) is stored as it is.
 * `deferrable` false: this is the retry of a deferred Bundle at the end of the run.
 */
export async function importResource(deps: FhirDeps, ctx: DocumentContext, resource: Resource, deferrable: boolean): Promise<void> {
  if (resource.resourceType === 'Bundle' && (resource.type === 'transaction' || resource.type === 'batch')) {
    await processTransaction(deps, ctx, resource, deferrable);
  } else if (resource.resourceType === 'Bundle' && resource.type === 'collection') {
    await importCollection(ctx, resource);
  } else {
    await addLoose(ctx, { resource: resource.id === undefined ? carryLiterals(resource, { ...resource, id: newId() }) : (resource as Resource & { id: string }) });
  }
}

/** Imports one FHIR JSON document (importResource); a file that is not one is reported. */
export async function importDocument(deps: FhirDeps, ctx: DocumentContext, text: string, deferrable = true): Promise<void> {
  let resource: Resource;
  try {
    resource = parseResource(text);
  } catch (err) {
    ctx.fail((err as Error).message, 1);
    return;
  }
  await importResource(deps, ctx, resource, deferrable);
}

/** An entry's diagnostics without the `Bundle.entry[i]: ` they start with (located), which the report puts first. */
function withoutEntry(text: string, i: number): string {
  const at = `Bundle.entry[${i}]: `;
  return text.startsWith(at) ? text.slice(at.length) : text;
}
