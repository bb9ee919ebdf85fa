FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm postgresql-client && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt package.json package-lock.json ./
RUN pip install --no-cache-dir -r requirements.txt && npm ci --no-audit --no-fund
COPY . .
# Collected, hashed and compressed static files, served by WhiteNoise.
ENV GYM_COLLECTED_STATIC=1
RUN DEBUG=0 SECRET_KEY=build-only-never-used-to-sign-anything python manage.py collectstatic --noinput
EXPOSE 8000
