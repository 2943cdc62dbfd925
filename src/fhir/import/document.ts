import { FhirError, type FhirIssue } from '../../errors.ts';
import { operatorAccess } from '../access.ts';
import { validationLevel, type FhirDeps } from '../crud.ts';
import { asResource, type Resource } from '../resource.ts';
import { processBundle } from '../transaction.ts';
import { requireValid } from '../validation/check.ts';
import type { BatchWriter } from './batches.ts';

type Json = Record<string, unknown>;

/** What a JSON document import needs from the importer. */
export interface DocumentContext {
  tenant: string;
  fhirBase: string;
  writer: BatchWriter;
  /** Counts `count` resources as failed and reports why (an invalid resource: each problem in `issues`). */
  fail(message: string, count?: number, issues?: FhirIssue[]): void;
  /** Counts resources written outside the batch writer (transaction and batch Bundles). */
  imported(count: number): void;
}

/** Parses an import line or document: a JSON object holding a known R4 resource with a valid id. */
export function parseResource(text: string): Resource {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new FhirError('structure', `malformed JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new FhirError('structure', 'not a JSON object');
  return asResource(value);
}

function isWrite(entry: unknown): boolean {
  const method = ((entry as Json | null)?.request as Json | undefined)?.method;
  return method !== 'GET';
}

/** transaction / batch Bundles: FHIR R4 http 3.1.0.11 semantics, as if posted to the FHIR base. */
async function processTransaction(deps: FhirDeps, ctx: DocumentContext, bundle: Resource): Promise<void> {
  await ctx.writer.drain();
  const entries = Array.isArray(bundle.entry) ? (bundle.entry as unknown[]) : [];
  const writes = entries.filter(isWrite).length;
  let response: Json;
  try {
    response = await processBundle(deps, { tenant: ctx.tenant, access: operatorAccess }, bundle, ctx.fhirBase);
  } catch (err) {
    if (!(err instanceof FhirError)) throw err;
    ctx.fail(`${bundle.type} Bundle rolled back: ${err.message}`, Math.max(writes, 1), err.status === 422 ? err.issues : undefined);
    return;
  }
  let ok = 0;
  (response.entry as Json[]).forEach((out, i) => {
    if (!isWrite(entries[i])) return;
    const r = out.response as { status: string; outcome?: { issue?: FhirIssue[] } };
    if (r.status.startsWith('2')) ok++;
    else ctx.fail(`Bundle.entry[${i}]: ${r.status}: ${r.outcome?.issue?.[0]?.diagnostics ?? 'failed'}`, 1, r.status === '422' ? r.outcome?.issue : undefined);
  });
  ctx.imported(ok);
}

/** collection Bundles: each entry's resource is created or updated by its id. */
async function importCollection(deps: FhirDeps, ctx: DocumentContext, bundle: Resource): Promise<void> {
  const entries = Array.isArray(bundle.entry) ? (bundle.entry as unknown[]) : [];
  for (const [i, entry] of entries.entries()) {
    let resource: Resource;
    try {
      resource = asResource((entry as Json | null)?.resource);
      requireValid(resource, validationLevel(deps), `Bundle.entry[${i}].resource`);
    } catch (err) {
      if (!(err instanceof FhirError)) throw err;
      ctx.fail(err.status === 422 ? err.message : `Bundle.entry[${i}].resource: ${err.message}`, 1, err.status === 422 ? err.issues : undefined);
      continue;
    }
    await ctx.writer.add(resource);
  }
}

/**
 * Imports one JSON document: a transaction or batch Bundle is processed as such, a collection Bundle
 * is unpacked, any other resource (including other Bundle types) is stored as it is.
 */
export async function importDocument(deps: FhirDeps, ctx: DocumentContext, text: string): Promise<void> {
  let resource: Resource;
  try {
    resource = parseResource(text);
  } catch (err) {
    ctx.fail((err as Error).message);
    return;
  }
  if (resource.resourceType === 'Bundle' && (resource.type === 'transaction' || resource.type === 'batch')) {
    await processTransaction(deps, ctx, resource);
  } else if (resource.resourceType === 'Bundle' && resource.type === 'collection') {
    await importCollection(deps, ctx, resource);
  } else {
    try {
      requireValid(resource, validationLevel(deps));
    } catch (err) {
      if (!(err instanceof FhirError)) throw err;
      ctx.fail(err.message, 1, err.issues);
      return;
    }
    await ctx.writer.add(resource);
  }
}
