/**
 * What the pages are branded with and where an operator's own templates, styles and languages are
 * (API.md, "Pages"). Filled in by app.ts from the configuration; read nowhere else.
 */
export interface PageSettings {
	/** APP_NAME: named in every page's title and heading. */
	appName: string
	/** BRAND_LOGO_URL: an image shown above every page's heading; its origin joins the CSP's img-src. */
	brandLogoUrl?: string
	/** BRAND_COLOR: buttons, links and focus rings (a CSS colour: #rgb, #rrggbb, a name, rgb() or hsl()). */
	brandColor?: string
	/** PAGES_DIR: `templates/<name>.mustache`, `locales/<lang>.json` and `styles.css` replace or add to the built-in ones. */
	dir?: string
	/** This service's public origin (PUBLIC_URL), when set: form posts from it are accepted besides the request's own host. */
	publicUrl?: string
}
