import type { Coding } from './datatypes.ts';

/** One entry of a FHIR R4 Parameters resource as the terminology operations produce it. */
export interface ParametersParameter {
  readonly name: string;
  readonly valueBoolean?: boolean;
  readonly valueString?: string;
  readonly valueUri?: string;
  readonly valueCode?: string;
  readonly valueCoding?: Coding;
  readonly valueInteger?: number;
  readonly valueDecimal?: number;
  readonly valueDateTime?: string;
  readonly part?: readonly ParametersParameter[];
  readonly resource?: Readonly<Record<string, unknown>>;
}

/** A FHIR R4 Parameters resource (operation output). */
export interface Parameters {
  readonly resourceType: 'Parameters';
  readonly parameter: readonly ParametersParameter[];
}
