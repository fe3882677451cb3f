/**
 * The confirmation of an action that cannot be undone: a modal <dialog> (showModal makes the rest of the page
 * inert, so focus stays inside; Escape cancels), saying what will happen, with the safe choice focused first.
 */
import { h } from './dom'

export function confirmAction({ title, body, confirm, danger = true }: { title: string; body: string[]; confirm: string; danger?: boolean }): Promise<boolean> {
	const opener = document.activeElement instanceof HTMLElement ? document.activeElement : undefined
	return new Promise((resolve) => {
		const cancelButton = h('button', { type: 'button', class: 'secondary', value: 'cancel' }, 'Cancel')
		const confirmButton = h('button', { type: 'button', class: danger ? 'danger' : 'primary', value: 'confirm', 'data-confirm': true }, confirm)
		const dialog = h(
			'dialog',
			{ 'aria-labelledby': 'confirm-title', 'aria-describedby': 'confirm-body' },
			h('h2', { id: 'confirm-title' }, title),
			h('div', { id: 'confirm-body' }, ...body.map((line) => h('p', {}, line))),
			h('div', { class: 'actions' }, cancelButton, confirmButton),
		)
		const close = (answer: boolean) => {
			dialog.close()
			dialog.remove()
			opener?.focus()
			resolve(answer)
		}
		cancelButton.addEventListener('click', () => close(false))
		confirmButton.addEventListener('click', () => close(true))
		dialog.addEventListener('cancel', (event) => {
			event.preventDefault()
			close(false)
		})
		// Tab and Shift+Tab go round the dialog's two buttons, never out to the browser's own controls.
		dialog.addEventListener('keydown', (event) => {
			if (event.key !== 'Tab') return
			const edge = event.shiftKey ? cancelButton : confirmButton
			if (document.activeElement === edge) {
				event.preventDefault()
				;(event.shiftKey ? confirmButton : cancelButton).focus()
			}
		})
		document.body.append(dialog)
		dialog.showModal()
		cancelButton.focus()
	})
}
