// Swagger UI for /docs, started from this file rather than an inline script, so that the page's
// Content-Security-Policy allows only scripts of this origin.
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  deepLinking: true,
});
