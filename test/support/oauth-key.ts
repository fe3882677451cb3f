import { generateRsaPem } from '../../src/config/rsa-key'

/**
 * One RSA 2048 key per test process for OAUTH_SIGNING_KEY (about 100 ms to make): every test app and every
 * binary started in production signs ID tokens with it, as an operator's would.
 */
export const TEST_OAUTH_SIGNING_KEY = generateRsaPem()
