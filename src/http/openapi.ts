import { t } from 'elysia'
import { PROBLEM_KINDS, PROBLEM_TYPE_BASE } from './problem'

export const FieldErrorSchema = t.Object({
	pointer: t.String({ description: 'JSON Pointer (as a URI fragment) to the invalid member', examples: ['#/email'] }),
	detail: t.String({ examples: ['must be an email address'] }),
	code: t.String({ examples: ['format'] }),
})

export const ProblemSchema = t.Object(
	{
		type: t.String({ format: 'uri', examples: [`${PROBLEM_TYPE_BASE}validation-error`] }),
		title: t.String({ examples: ['Validation failed'] }),
		status: t.Integer({ examples: [422] }),
		detail: t.String({ examples: ['1 field is invalid'] }),
		instance: t.String({ examples: ['/api/users'] }),
		requestId: t.Optional(t.String({ description: 'present on 500 responses' })),
		data: t.Null(),
		message: t.String({ examples: ['1 field is invalid'] }),
		errors: t.Array(FieldErrorSchema),
	},
	{ description: 'RFC 9457 problem details, with the envelope members `data`, `message` and `errors`' },
)

/** Success envelope around a data schema. */
export const Envelope = <T extends Parameters<typeof t.Object>[0][string]>(data: T) =>
	t.Object({ data, message: t.String(), errors: t.Array(t.Never(), { maxItems: 0 }) })

type Status = (typeof PROBLEM_KINDS)[keyof typeof PROBLEM_KINDS]['status']

/** Response schemas for the problems a route can answer with, keyed by status. */
export function problemResponses<S extends Status>(...statuses: S[]): Record<S, typeof ProblemSchema> {
	return Object.fromEntries(statuses.map((status) => [status, ProblemSchema])) as Record<S, typeof ProblemSchema>
}
