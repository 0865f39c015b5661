"""One ``APIRouter`` per resource of the HTTP API; ``service.http.app.create_app`` includes them in
the order the OpenAPI document lists them."""
