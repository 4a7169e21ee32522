import os

from config.settings import default_module

os.environ.setdefault("DJANGO_SETTINGS_MODULE", default_module())

from django.core.wsgi import get_wsgi_application  # noqa: E402

from common.middleware import honour_connection_close  # noqa: E402

application = honour_connection_close(get_wsgi_application())
