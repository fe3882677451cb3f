import { t } from 'elysia'
import { Email, Password } from '../users/model'

const Token = t.String({ minLength: 1, maxLength: 512, description: 'the token from the mail’s link (after `#token=`)', examples: ['q3Bf0Xk2p9cVwz1Lr8TqJm5sYd7eHn4uAa6GiKoPlEw'] })
const Code = t.String({ pattern: '^[0-9]{6}$', error: 'must be the 6 digits from the mail', description: 'the 6-digit code from the mail', examples: ['042917'] })
const closed = { additionalProperties: false } as const

export namespace EmailModel {
	export const mailRequest = t.Object({ email: Email }, closed)

	export const verification = t.Union(
		[t.Object({ token: Token }, { ...closed, title: 'By link token' }), t.Object({ email: Email, code: Code }, { ...closed, title: 'By address and code' })],
		{ description: 'the token from the link, or the address the mail went to and its code' },
	)

	export const codeSignIn = t.Object({ email: Email, code: Code }, { ...closed, description: 'the address the sign-in code went to, and the code' })

	export const passwordReset = t.Union(
		[
			t.Object({ token: Token, password: Password }, { ...closed, title: 'By link token' }),
			t.Object({ email: Email, code: Code, password: Password }, { ...closed, title: 'By address and code' }),
		],
		{ description: 'the token from the link, or the address and its code; and the new password' },
	)
}
