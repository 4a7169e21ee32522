"""Opaque, unguessable public references: internal integer ids never leave the service."""

import secrets

from django.db import models


def new_ref(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(12)}"


class RefField(models.CharField):
    """A unique public ref such as ``off_3q2…``, filled on first save."""

    def __init__(self, *args, prefix: str = "ref", **kwargs):
        self.prefix = prefix
        kwargs.setdefault("max_length", 40)
        kwargs.setdefault("unique", True)
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        kwargs["prefix"] = self.prefix
        for key, default in (("max_length", 40), ("unique", True), ("editable", False)):
            if kwargs.get(key) == default:
                kwargs.pop(key)
        return name, path, args, kwargs

    def pre_save(self, model_instance, add):
        value = getattr(model_instance, self.attname)
        if not value:
            value = new_ref(self.prefix)
            setattr(model_instance, self.attname, value)
        return value
