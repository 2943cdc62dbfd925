/// <reference lib="webworker" />
/**
 * Entry of the GraphQL introspection Worker thread (introspection.ts): answers introspection-only
 * queries (`__schema`, `__type`) against its own copy of the FHIR schema, so that the some 11 MB answer
 * of a full introspection is computed and serialised off the thread that serves requests. The query
 * was parsed and validated by the requesting thread; the answer goes back as JSON text. Listed as an
 * entry point of `bun build --compile`.
 */
import { execute, parse } from 'graphql';
import { FhirGraphqlSchema } from './schema.ts';

export interface ToIntrospectionWorker {
  id: number;
  query: string;
  variables?: Record<string, unknown> | undefined;
  operationName?: string | undefined;
  /** The resource type of an instance-level request (its schema's root), or none for the system level. */
  focusType?: string | undefined;
}
export type FromIntrospectionWorker = { id: number; text: string } | { id: number; error: string };

declare const self: Worker;

let schemas: FhirGraphqlSchema | undefined;

self.addEventListener('message', (event: MessageEvent<ToIntrospectionWorker>) => {
  const job = event.data;
  try {
    schemas ??= new FhirGraphqlSchema();
    const schema = job.focusType ? schemas.instance(job.focusType) : schemas.system;
    const result = execute({
      schema, document: parse(job.query), variableValues: job.variables ?? null, operationName: job.operationName ?? null,
    });
    if (result instanceof Promise) throw new Error('an introspection query resolved asynchronously');
    const answer: Record<string, unknown> = { data: result.data ?? null };
    if (result.errors?.length) answer.errors = result.errors.map((e) => e.toJSON());
    self.postMessage({ id: job.id, text: JSON.stringify(answer) } satisfies FromIntrospectionWorker);
  } catch (err) {
    self.postMessage({ id: job.id, error: err instanceof Error ? err.message : String(err) } satisfies FromIntrospectionWorker);
  }
});
