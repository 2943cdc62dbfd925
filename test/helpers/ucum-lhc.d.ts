/** The part of the LHC UCUM library (@lhncbc/ucum-lhc) the UCUM tests use. */
declare module '@lhncbc/ucum-lhc' {
  interface UcumLhcUtils {
    convertUnitTo(fromUnit: string, value: number, toUnit: string): { status: 'succeeded' | 'failed' | 'error'; toVal: number; msg: string[] };
    validateUnitString(unit: string): { status: 'valid' | 'invalid' | 'error'; msg: string[] };
  }
  const ucum: { UcumLhcUtils: { getInstance(): UcumLhcUtils } };
  export default ucum;
}
