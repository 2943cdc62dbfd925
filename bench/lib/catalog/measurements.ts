/** LOINC codes with UCUM units for vital signs and laboratory tests. */

export interface VitalSign {
  code: string;
  display: string;
  unit: string;
  /** Profile from the R4 vital signs profiles (observation-vitalsigns). */
  profile: string;
  /** A second LOINC coding the profile requires beside `code` (oxygensat: 2708-6, as US Core's pulse oximetry has it). */
  also?: { code: string; display: string };
}

const VS = "http://hl7.org/fhir/StructureDefinition/";

export const VITALS = {
  height: { code: "8302-2", display: "Body height", unit: "cm", profile: `${VS}bodyheight` },
  weight: { code: "29463-7", display: "Body weight", unit: "kg", profile: `${VS}bodyweight` },
  bmi: { code: "39156-5", display: "Body mass index (BMI) [Ratio]", unit: "kg/m2", profile: `${VS}bmi` },
  heartRate: { code: "8867-4", display: "Heart rate", unit: "/min", profile: `${VS}heartrate` },
  respiratoryRate: { code: "9279-1", display: "Respiratory rate", unit: "/min", profile: `${VS}resprate` },
  temperature: { code: "8310-5", display: "Body temperature", unit: "Cel", profile: `${VS}bodytemp` },
  oxygenSaturation: {
    code: "59408-5",
    display: "Oxygen saturation in Arterial blood by Pulse oximetry",
    unit: "%",
    profile: `${VS}oxygensat`,
    also: { code: "2708-6", display: "Oxygen saturation in Arterial blood" },
  },
  bloodPressure: {
    code: "85354-9",
    display: "Blood pressure panel with all children optional",
    unit: "mm[Hg]",
    profile: `${VS}bp`,
  },
} as const satisfies Record<string, VitalSign>;

export const SYSTOLIC = { code: "8480-6", display: "Systolic blood pressure" } as const;
export const DIASTOLIC = { code: "8462-4", display: "Diastolic blood pressure" } as const;

export const PAIN_SCORE = {
  code: "72514-3",
  display: "Pain severity - 0-10 verbal numeric rating [Score] - Reported",
  unit: "{score}",
} as const;

export const SMOKING_STATUS = { code: "72166-2", display: "Tobacco smoking status" } as const;

export const SMOKING_VALUES = [
  { code: "266919005", display: "Never smoked tobacco (finding)", weight: 60 },
  { code: "8517006", display: "Ex-smoker (finding)", weight: 25 },
  { code: "449868002", display: "Smokes tobacco daily (finding)", weight: 15 },
] as const;

export interface LabTest {
  code: string;
  display: string;
  unit: string;
  mean: number;
  sd: number;
  low: number;
  high: number;
  decimals: number;
}

export interface LabPanel {
  code: string;
  display: string;
  tests: readonly LabTest[];
}

function lab(code: string, display: string, unit: string, range: [number, number, number, number, number]): LabTest {
  const [mean, sd, low, high, decimals] = range;
  return { code, display, unit, mean, sd, low, high, decimals };
}

export const BASIC_METABOLIC: LabPanel = {
  code: "51990-0",
  display: "Basic metabolic panel - Blood",
  tests: [
    lab("2339-0", "Glucose [Mass/volume] in Blood", "mg/dL", [92, 14, 70, 99, 1]),
    lab("6299-2", "Urea nitrogen [Mass/volume] in Blood", "mg/dL", [14, 4, 7, 20, 1]),
    lab("38483-4", "Creatinine [Mass/volume] in Blood", "mg/dL", [0.95, 0.2, 0.6, 1.3, 2]),
    lab("49765-1", "Calcium [Mass/volume] in Blood", "mg/dL", [9.5, 0.4, 8.6, 10.3, 1]),
    lab("2947-0", "Sodium [Moles/volume] in Blood", "mmol/L", [140, 2, 136, 145, 0]),
    lab("6298-4", "Potassium [Moles/volume] in Blood", "mmol/L", [4.3, 0.35, 3.5, 5.1, 1]),
    lab("2069-3", "Chloride [Moles/volume] in Blood", "mmol/L", [103, 2.5, 98, 107, 0]),
    lab("20565-8", "Carbon dioxide, total [Moles/volume] in Blood", "mmol/L", [25, 2, 22, 29, 0]),
  ],
};

export const LIPID_PANEL: LabPanel = {
  code: "57698-3",
  display: "Lipid panel with direct LDL - Serum or Plasma",
  tests: [
    lab("2093-3", "Cholesterol [Mass/volume] in Serum or Plasma", "mg/dL", [190, 30, 100, 200, 0]),
    lab("2571-8", "Triglycerides [Mass/volume] in Serum or Plasma", "mg/dL", [130, 45, 0, 150, 0]),
    lab("18262-6", "Cholesterol in LDL [Mass/volume] in Serum or Plasma by Direct assay", "mg/dL", [110, 28, 0, 130, 0]),
    lab("2085-9", "Cholesterol in HDL [Mass/volume] in Serum or Plasma", "mg/dL", [55, 12, 40, 100, 0]),
  ],
};

export const CBC_PANEL: LabPanel = {
  code: "58410-2",
  display: "CBC panel - Blood by Automated count",
  tests: [
    lab("6690-2", "Leukocytes [#/volume] in Blood by Automated count", "10*3/uL", [7, 1.8, 4.5, 11, 1]),
    lab("789-8", "Erythrocytes [#/volume] in Blood by Automated count", "10*6/uL", [4.8, 0.4, 4.2, 5.8, 2]),
    lab("718-7", "Hemoglobin [Mass/volume] in Blood", "g/dL", [14, 1.3, 12, 17.5, 1]),
    lab("4544-3", "Hematocrit [Volume Fraction] of Blood by Automated count", "%", [42, 3.5, 36, 50, 1]),
    lab("787-2", "MCV [Entitic volume] by Automated count", "fL", [90, 5, 80, 100, 1]),
    lab("785-6", "MCH [Entitic mass] by Automated count", "pg", [30, 1.8, 27, 33, 1]),
    lab("786-4", "MCHC [Mass/volume] by Automated count", "g/dL", [34, 1, 32, 36, 1]),
    lab("777-3", "Platelets [#/volume] in Blood by Automated count", "10*3/uL", [260, 55, 150, 400, 0]),
  ],
};

export const HBA1C: LabTest = lab("4548-4", "Hemoglobin A1c/Hemoglobin.total in Blood", "%", [7.2, 0.9, 4, 5.6, 1]);
