import { expect, test } from 'bun:test';
import { s3OptionsFromEnv } from '../../src/export/sink-s3.ts';

test('S3_* variables win over AWS_* ones, and an empty one is unset: its AWS_* fallback applies', () => {
  const aws = { AWS_ACCESS_KEY_ID: 'aws-key', AWS_SECRET_ACCESS_KEY: 'aws-secret', AWS_REGION: 'eu-west-1', AWS_ENDPOINT_URL: 'http://aws.example' };
  expect(s3OptionsFromEnv({ ...aws, S3_ACCESS_KEY_ID: 's3-key', S3_REGION: 'us-east-1' })).toEqual({
    accessKeyId: 's3-key', secretAccessKey: 'aws-secret', region: 'us-east-1', endpoint: 'http://aws.example',
  });
  expect(s3OptionsFromEnv({ ...aws, S3_ACCESS_KEY_ID: '', S3_SECRET_ACCESS_KEY: '', S3_REGION: '', S3_ENDPOINT: '' })).toEqual({
    accessKeyId: 'aws-key', secretAccessKey: 'aws-secret', region: 'eu-west-1', endpoint: 'http://aws.example',
  });
  expect(s3OptionsFromEnv({ S3_REGION: '', AWS_REGION: '', AWS_DEFAULT_REGION: 'ap-south-1', AWS_ENDPOINT_URL_S3: '', AWS_ENDPOINT_URL: 'http://e' })).toEqual({
    region: 'ap-south-1', endpoint: 'http://e',
  });
});
