"""A change records its containers' restart count and container ID when its write
was answered (``ResizeChange.written_state``): an in-place resize is verified only
when the container still runs as the same container, with the new resources."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("recommender", "0016_h23b_actuation_safety")]

    operations = [
        migrations.AddField(
            model_name="resizechange",
            name="written_state",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
